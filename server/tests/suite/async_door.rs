//! The async door (`unflat_server::app`): the router's matching, 405 and
//! `HEAD`; a route's body limit refused before its handler is asked; a
//! handler slow to read its body holding its client back rather than
//! buffering the upload.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use unflat_server::app::{get, post, Request, Response, Router, Status};
use unflat_server::{Running, Strategy};

use crate::common::{closed_within, config, connect, exchange};

fn serve(router: impl FnOnce() -> Router) -> Running<unflat_server::app::Routed> {
    let config = unflat_server::Config {
        max_body: 8 << 20,
        ..config(Strategy::Direct)
    };
    Running::start_with(config, |m| router().observed(m.standard())).expect("app starts")
}

#[test]
fn routes_decode_their_parameters_answer_405_and_head() {
    async fn show(req: Request) -> Response {
        let params: Vec<String> = req.params().map(|(n, v)| format!("{n}={v}")).collect();
        Response::text(params.join(" "))
    }
    let server = serve(|| {
        Router::new()
            .route("/p/{x}/{*rest}", get(show).post(show))
            .route("/café", get(|_| async { "café" }))
    });
    let r = exchange(&server, b"GET /p/a%2Fb/c/d%20e HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!((r.status, &*r.body), (200, &b"x=a/b rest=c/d%20e"[..]));
    let r = exchange(&server, b"GET /caf%C3%A9 HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!((r.status, &*r.body), (200, "café".as_bytes()));
    let r = exchange(&server, b"DELETE /p/a/b HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(
        (r.status, r.header("allow")),
        (405, Some("GET, POST, HEAD"))
    );
    let get = exchange(&server, b"GET /p/a/b HTTP/1.1\r\nHost: t\r\n\r\n");
    let head = exchange(&server, b"HEAD /p/a/b HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(head.header("content-length"), get.header("content-length"));
    // An empty segment is no parameter; a path no route has is the
    // fallback's.
    for path in ["/p//b", "/p/a", "/q"] {
        let r = exchange(
            &server,
            format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes(),
        );
        assert_eq!((r.status, &*r.body), (404, &b"not found\n"[..]), "{path}");
    }
    server.stop().unwrap();
}

#[test]
fn a_routes_body_limit_is_refused_before_its_handler_is_asked() {
    let asked = Arc::new(AtomicUsize::new(0));
    let counted = asked.clone();
    let server = serve(move || {
        let handler = move |req: Request| {
            counted.fetch_add(1, Ordering::Relaxed);
            async move { Response::text(format!("{} bytes", req.bytes().await.len())) }
        };
        Router::new().route("/up", post(handler).limit(10))
    });
    let r = exchange(
        &server,
        b"POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n0123456789",
    );
    assert_eq!((r.status, &*r.body), (200, &b"10 bytes"[..]));
    assert_eq!(asked.swap(0, Ordering::Relaxed), 1);
    // From the length alone, with or without `Expect: 100-continue`: no
    // `100 Continue`, a 413, the close.
    for expect in ["", "Expect: 100-continue\r\n"] {
        let mut s = connect(&server);
        let head = format!("POST /up HTTP/1.1\r\nHost: t\r\n{expect}Content-Length: 11\r\n\r\n");
        s.write_all(head.as_bytes()).unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).unwrap();
        let out = String::from_utf8_lossy(&out);
        assert!(out.starts_with("HTTP/1.1 413 "), "{expect:?}: {out}");
        assert!(!out.contains("100 Continue"), "{out}");
    }
    // A chunked body, as it passes the limit.
    let mut s = connect(&server);
    s.write_all(b"POST /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n6\r\n012345\r\n6\r\n678901\r\n0\r\n\r\n")
        .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    assert!(
        out.starts_with(b"HTTP/1.1 413 "),
        "{}",
        String::from_utf8_lossy(&out)
    );
    assert_eq!(
        asked.load(Ordering::Relaxed),
        1,
        "asked, but never answered"
    );
    server.stop().unwrap();
}

/// Bytes the upload sends.
const UPLOAD: usize = 4 << 20;

#[test]
fn a_handler_slow_to_read_holds_its_client_back() {
    // The handler waits before it reads: everything the connection read
    // meanwhile comes in its first chunk.
    async fn slow_reader(mut req: Request) -> Response {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let (mut body, mut largest, mut total) = (req.body(), 0, 0);
        while let Some(chunk) = body.chunk().await {
            largest = largest.max(chunk.len());
            total += chunk.len();
        }
        Response::text(format!("{total} {largest}"))
    }
    let server = serve(|| Router::new().route("/up", post(slow_reader)));
    let mut s = connect(&server);
    let head = format!(
        "POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: {UPLOAD}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(head.as_bytes()).unwrap();
    let mut writer = s.try_clone().unwrap();
    let sending = std::thread::spawn(move || writer.write_all(&vec![b'x'; UPLOAD]).unwrap());
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    sending.join().unwrap();
    let out = String::from_utf8_lossy(&out);
    let (_, body) = out.split_once("\r\n\r\n").unwrap();
    let (total, largest) = body.split_once(' ').unwrap();
    assert_eq!(total.parse::<usize>().unwrap(), UPLOAD);
    // 64 KiB untaken stop the reads; one read more may land on them.
    let largest: usize = largest.parse().unwrap();
    assert!(
        largest <= 256 * 1024,
        "{largest} bytes read ahead of the handler"
    );
    assert!(closed_within(&mut s, Duration::from_secs(1)));
    server.stop().unwrap();
}

#[test]
fn a_handlers_panic_is_a_500_and_the_connection_goes_on() {
    async fn boom(_: Request) -> Response {
        panic!("boom")
    }
    let server = serve(|| {
        Router::new()
            .route("/boom", get(boom))
            .route("/ok", get(|_| async { (Status::CREATED, "made") }))
    });
    let mut s = connect(&server);
    s.write_all(b"GET /boom HTTP/1.1\r\nHost: t\r\n\r\nGET /ok HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let out = String::from_utf8_lossy(&out);
    assert!(out.starts_with("HTTP/1.1 500 "), "{out}");
    assert!(
        out.contains("HTTP/1.1 201 Created\r\n") && out.ends_with("made"),
        "{out}"
    );
    server.stop().unwrap();
}

/// `--workers` is honoured by `serve` as by `run`: awaited on a runtime of
/// one thread, a server asked for two serves on two threads of its own.
#[tokio::test(flavor = "current_thread")]
async fn serve_honours_workers_on_a_runtime_of_another_size() {
    let seen = served_on(2).await;
    assert!(
        !seen.contains(&std::thread::current().id()),
        "served on the caller's thread"
    );
    assert_eq!(seen.len(), 2, "{seen:?}");
}

/// A server asked for one worker and awaited on a current-thread runtime
/// (one worker too) serves on it: on the caller's thread, no other.
#[tokio::test(flavor = "current_thread")]
async fn serve_with_one_worker_runs_on_a_current_thread_runtime_it_is_awaited_on() {
    let seen = served_on(1).await;
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        [std::thread::current().id()]
    );
}

/// The threads that served 16 connections of 20 requests each, for a
/// server of `workers` awaited on the caller's runtime.
async fn served_on(workers: u16) -> std::collections::HashSet<std::thread::ThreadId> {
    use std::collections::HashSet;
    use std::sync::Mutex;
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let noted = seen.clone();
    let config = unflat_server::Config {
        workers: Some(workers),
        ..config(Strategy::Direct)
    };
    let router = Router::new().route(
        "/where",
        get(move |_| {
            noted.lock().unwrap().insert(std::thread::current().id());
            async { "here" }
        }),
    );
    let server =
        unflat_server::Server::bind_with(config, |m| router.observed(m.standard())).unwrap();
    let addr = server.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.serve(async {
        let _ = stopped.await;
    }));
    let asked = tokio::task::spawn_blocking(move || {
        // Connections at once, so that every worker takes some.
        let clients: Vec<_> = (0..16)
            .map(|_| {
                std::thread::spawn(move || {
                    let mut s = std::net::TcpStream::connect(addr).unwrap();
                    for _ in 0..20 {
                        s.write_all(b"GET /where HTTP/1.1\r\nHost: t\r\n\r\n")
                            .unwrap();
                        let mut buf = [0; 512];
                        let n = s.read(&mut buf).unwrap();
                        assert!(buf[..n].ends_with(b"here"));
                    }
                })
            })
            .collect();
        clients.into_iter().for_each(|c| c.join().unwrap());
    });
    asked.await.unwrap();
    stop.send(()).unwrap();
    serving.await.unwrap().unwrap();
    let seen = seen.lock().unwrap().clone();
    seen
}

/// A body the handler hands on — to its response's stream here — is kept
/// for it whole and ended: the stream sends it all, then ends.
#[test]
fn a_body_handed_on_outlives_its_handler() {
    let server = serve(|| {
        Router::new().route(
            "/echo",
            post(|mut req: Request| async move { Response::stream(req.body()) }).limit(1 << 20),
        )
    });
    let body = vec![b'z'; 200_000];
    // To HTTP/1.0 a stream is its bytes as they are, ended by the close.
    let mut request = b"POST /echo HTTP/1.0\r\nContent-Length: 200000\r\n\r\n".to_vec();
    request.extend_from_slice(&body);
    let mut s = connect(&server);
    s.write_all(&request).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let at = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    assert!(out.starts_with(b"HTTP/1.1 200 "));
    assert_eq!(out[at + 4..].len(), body.len());
    assert!(out[at + 4..] == body[..]);
    server.stop().unwrap();
}

/// A handler that refuses before asking for its body spares a client
/// waiting for `100 Continue` the sending of it.
#[test]
fn an_early_refusal_sends_no_100_continue() {
    let server =
        serve(|| Router::new().route("/up", post(|_| async { (Status::UNAUTHORIZED, "no\n") })));
    let mut s = connect(&server);
    s.write_all(
        b"POST /up HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n",
    )
    .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let out = String::from_utf8_lossy(&out);
    assert!(out.starts_with("HTTP/1.1 401 "), "{out}");
    assert!(!out.contains("100 Continue"), "{out}");
    server.stop().unwrap();
}

/// An upload whose handler has not taken its last 64 KiB is not idle: a
/// new client at `--max-connections` does not cut it.
#[test]
fn a_paused_upload_is_not_given_up_at_the_connection_limit() {
    async fn slow_reader(mut req: Request) -> Response {
        tokio::time::sleep(Duration::from_millis(600)).await;
        let (mut body, mut total) = (req.body(), 0);
        while let Some(chunk) = body.chunk().await {
            total += chunk.len();
        }
        Response::text(format!("{total}"))
    }
    let config = unflat_server::Config {
        max_body: 8 << 20,
        max_connections: 1,
        ..config(Strategy::Direct)
    };
    let server = Running::start_with(config, |m| {
        Router::new()
            .route("/up", post(slow_reader))
            .observed(m.standard())
    })
    .expect("app starts");
    let mut s = connect(&server);
    let head = format!(
        "POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: {UPLOAD}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(head.as_bytes()).unwrap();
    let mut writer = s.try_clone().unwrap();
    let sending = std::thread::spawn(move || writer.write_all(&vec![b'x'; UPLOAD]).is_ok());
    // A second client while the upload waits for its handler.
    std::thread::sleep(Duration::from_millis(200));
    let other = std::net::TcpStream::connect(server.addr()).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    assert!(sending.join().unwrap(), "the upload was cut");
    let out = String::from_utf8_lossy(&out);
    assert!(
        out.starts_with("HTTP/1.1 200 ") && out.ends_with(&UPLOAD.to_string()),
        "{out}"
    );
    drop(other);
    server.stop().unwrap();
}
