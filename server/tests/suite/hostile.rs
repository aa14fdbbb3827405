//! Slow and hostile clients, timeouts and graceful shutdown. Timeouts are
//! set short here; the assertions are on bytes, statuses and counts.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::tls::{Cert, Duplex};
use crate::common::{closed_within, config, connect, read_response, Spawned, SHORT_TIMEOUTS};
use crate::common::{start_demo, Site};
use unflat_server::{Config, Running, Strategy};

fn short_timeouts() -> Config {
    Config {
        head_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(1),
        send_timeout: Duration::from_secs(1),
        min_send_rate_grace: Duration::from_secs(1),
        body_timeout: Duration::from_secs(1),
        ..config(Strategy::Direct)
    }
}

/// Whether the server has sent something on `s`, without waiting.
fn answered(s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let answered = matches!(s.peek(&mut [0u8; 1]), Ok(n) if n > 0);
    s.set_nonblocking(false).unwrap();
    answered
}

fn served(server: &Running<Site>) -> bool {
    let r = crate::common::exchange(server, b"GET /end-string/3 HTTP/1.1\r\nHost: t\r\n\r\n");
    r.status == 200 && r.body == b"aaa"
}

#[test]
fn slowloris_is_answered_408_and_closed_at_the_head_deadline() {
    let server = start_demo(short_timeouts()).unwrap();
    let mut slow = connect(&server);
    let head = b"GET /end-string/3 HTTP/1.1\r\nHost: t\r\nX-Slow: ";
    let start = Instant::now();
    let mut sent = 0;
    let mut buf = Vec::new();
    // One byte every 100 ms: never a whole head.
    let response = loop {
        let byte = head.get(sent).copied().unwrap_or(b'a');
        if slow.write_all(&[byte]).is_err() {
            break read_response(&mut slow, &mut buf, false).ok();
        }
        sent += 1;
        std::thread::sleep(Duration::from_millis(100));
        assert!(served(&server), "others are served meanwhile");
        if answered(&slow) {
            break read_response(&mut slow, &mut buf, false).ok();
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "still open after 10 s"
        );
    };
    let response = response.expect("a 408 response");
    assert_eq!(response.status, 408);
    assert_eq!(response.header("connection"), Some("close"));
    assert!(closed_within(&mut slow, Duration::from_secs(5)));
    // About one second's worth of bytes went in: 10 a second.
    assert!(
        (5..=30).contains(&sent),
        "{sent} bytes sent before the deadline"
    );
}

#[test]
fn idle_keep_alive_connections_are_closed() {
    let server = start_demo(short_timeouts()).unwrap();
    let mut s = connect(&server);
    s.write_all(b"GET /end-string/3 HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let r = read_response(&mut s, &mut Vec::new(), false).unwrap();
    assert_eq!(r.header("keep-alive"), Some("timeout=1"));
    assert!(
        closed_within(&mut s, Duration::from_secs(5)),
        "closed after the idle timeout"
    );
}

#[test]
fn silent_body_is_answered_408_and_closed_after_the_body_timeout() {
    let server = start_demo(short_timeouts()).unwrap();
    let mut s = connect(&server);
    s.write_all(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc")
        .unwrap();
    let r = read_response(&mut s, &mut Vec::new(), false).unwrap();
    assert_eq!(r.status, 408);
    assert_eq!(r.header("connection"), Some("close"));
    assert!(closed_within(&mut s, Duration::from_secs(5)));
}

/// A 408 is dated when it is sent, not when the turn that read the head
/// began: the clocks are read once per turn, and a deadline ends no turn.
#[test]
fn a_408_is_dated_when_it_is_sent() {
    let server = start_demo(Config {
        body_timeout: Duration::from_secs(3),
        ..short_timeouts()
    })
    .unwrap();
    let mut s = connect(&server);
    s.write_all(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc")
        .unwrap();
    let r = read_response(&mut s, &mut Vec::new(), false).unwrap();
    let now = std::time::SystemTime::now();
    assert_eq!(r.status, 408);
    let date = httpdate::parse_http_date(r.header("date").expect("a Date")).unwrap();
    let age = now.duration_since(date).unwrap_or_default();
    assert!(
        age < Duration::from_secs(2),
        "dated {age:?} before it was read"
    );
}

/// Sends `head`, then `body` one byte every 250 ms until the server
/// answers; returns the answer, the bytes of `body` sent, and the time from
/// the end of the head to the answer.
fn trickle(
    server: &Running<Site>,
    head: &[u8],
    body: &[u8],
) -> (crate::common::Raw, usize, Duration) {
    let mut s = connect(server);
    s.write_all(head).unwrap();
    let begun = Instant::now();
    let mut sent = 0;
    loop {
        if answered(&s) || sent == body.len() {
            let r = read_response(&mut s, &mut Vec::new(), false).unwrap();
            assert!(closed_within(&mut s, Duration::from_secs(5)));
            return (r, sent, begun.elapsed());
        }
        if s.write_all(&body[sent..sent + 1]).is_err() {
            sent = body.len();
            continue;
        }
        sent += 1;
        std::thread::sleep(Duration::from_millis(250));
        assert!(begun.elapsed() < Duration::from_secs(15), "still open");
    }
}

#[test]
fn trickled_bodies_and_trailers_are_answered_408_at_the_body_deadline() {
    // --body-timeout 2s, and bytes earn 1 s per 500 received: four bytes a
    // second earn nothing worth speaking of, so the deadline stays about
    // 2 s after the head, however often a byte comes (it used to restart
    // on every byte).
    let server = start_demo(Config {
        body_timeout: Duration::from_secs(2),
        body_min_rate: 500,
        ..config(Strategy::Direct)
    })
    .unwrap();
    let body = [b'x'; 100];
    let trailers = [&b"0\r\n"[..], &b"X-Slow: ".repeat(20)].concat();
    for (what, head, rest) in [
        (
            "a Content-Length body",
            &b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n"[..],
            &body[..],
        ),
        (
            "a chunked body",
            b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n64\r\n",
            &body[..],
        ),
        (
            "a trailer section",
            b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n",
            &trailers[..],
        ),
    ] {
        let (r, sent, took) = trickle(&server, head, rest);
        assert_eq!(
            r.status,
            408,
            "{what}: {:?}",
            String::from_utf8_lossy(&r.body)
        );
        assert_eq!(r.header("connection"), Some("close"), "{what}");
        assert!(
            took >= Duration::from_millis(1900) && took < Duration::from_secs(4),
            "{what}: answered after {took:?}"
        );
        assert!(sent < rest.len(), "{what}: the whole body went in");
    }
    // A body that keeps to the rate is read: 600 bytes at once earn 1.2 s
    // beyond the 2 s, so the last byte, at 3 s, is in time — and no
    // silence was longer than the 2 s of --body-timeout.
    let mut s = connect(&server);
    s.write_all(b"POST /echo?format=raw HTTP/1.1\r\nHost: t\r\nContent-Length: 602\r\n\r\n")
        .unwrap();
    s.write_all(&[b'y'; 600]).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    s.write_all(b"z").unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    s.write_all(b"z").unwrap();
    let r = read_response(&mut s, &mut Vec::new(), false).unwrap();
    assert_eq!((r.status, r.body.len()), (200, 602));
}

/// Credit has a ceiling: a body sent fast earns time at --body-min-rate,
/// but never past --max-body-time, however steadily it then trickles (one
/// megabyte at once earned half an hour at 500 bytes a second).
#[test]
fn no_body_lasts_past_the_max_body_time() {
    let server = start_demo(Config {
        body_timeout: Duration::from_secs(1),
        body_min_rate: 500,
        max_body_time: Duration::from_secs(3),
        ..config(Strategy::Direct)
    })
    .unwrap();
    let mut s = connect(&server);
    s.write_all(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1048100\r\n\r\n")
        .unwrap();
    s.write_all(&vec![b'x'; 1_048_000]).unwrap();
    let begun = Instant::now();
    let mut trickled = 0;
    // A byte every 400 ms: within --body-timeout of the last, so only the
    // ceiling can end it.
    let answered = loop {
        let answered = answered(&s);
        if answered || begun.elapsed() > Duration::from_secs(8) || s.write_all(b"y").is_err() {
            break answered;
        }
        trickled += 1;
        std::thread::sleep(Duration::from_millis(400));
    };
    assert!(
        answered,
        "still reading the body after {:?}",
        begun.elapsed()
    );
    let r = read_response(&mut s, &mut Vec::new(), false).unwrap();
    let took = begun.elapsed();
    assert_eq!((r.status, r.header("connection")), (408, Some("close")));
    assert!(
        took >= Duration::from_millis(2500) && took < Duration::from_secs(5),
        "answered after {took:?}, {trickled} bytes trickled"
    );
    assert!(closed_within(&mut s, Duration::from_secs(5)));
}

/// Time earned by a body cannot be spent in silence, and framing earns
/// none: a body sent fast, or framing alone, buys no more than
/// --body-timeout without payload.
#[test]
fn deadline_credit_cannot_be_bought() {
    let server = start_demo(Config {
        body_timeout: Duration::from_secs(2),
        body_min_rate: 500,
        ..config(Strategy::Direct)
    })
    .unwrap();
    let extension = format!("1;{}\r\n", "e".repeat(16 * 1024 - 1));
    for (what, sent) in [
        // 200 000 bytes of payload earn 400 s at 500 bytes a second; then
        // the client is silent.
        (
            "a Content-Length body sent fast, then silence",
            [
                &b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 200001\r\n\r\n"[..],
                &[b'x'; 200_000],
            ]
            .concat(),
        ),
        // 16 KiB of chunk extension, the cap: framing, which used to earn
        // 32 s.
        (
            "a chunk extension, then silence",
            [
                &b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
                extension.as_bytes(),
            ]
            .concat(),
        ),
    ] {
        let mut s = connect(&server);
        s.write_all(&sent).unwrap();
        let begun = Instant::now();
        let r = read_response(&mut s, &mut Vec::new(), false).unwrap();
        let took = begun.elapsed();
        assert_eq!(r.status, 408, "{what}");
        assert!(
            took >= Duration::from_millis(1900) && took < Duration::from_secs(4),
            "{what}: answered after {took:?}"
        );
    }
    // A chunk size of leading zeros is bounded like a line: 4 KiB of them
    // are refused at once (the 65th).
    let mut s = connect(&server);
    s.write_all(b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        .unwrap();
    s.write_all(&[b'0'; 4096]).unwrap();
    let r = read_response(&mut s, &mut Vec::new(), false).unwrap();
    assert_eq!(r.status, 400);
    assert_eq!(r.body, b"chunk size too long\n");
}

#[test]
fn max_requests_per_connection_closes_after_the_last() {
    let server = start_demo(Config {
        max_requests: Some(3),
        ..config(Strategy::Direct)
    })
    .unwrap();
    let mut s = connect(&server);
    let req = "GET /end-string/1 HTTP/1.1\r\nHost: t\r\n\r\n".repeat(5);
    s.write_all(req.as_bytes()).unwrap();
    let mut buf = Vec::new();
    let answers: Vec<_> = (0..3)
        .map(|_| read_response(&mut s, &mut buf, false).unwrap())
        .collect();
    assert_eq!(answers[2].header("connection"), Some("close"));
    assert!(answers[..2]
        .iter()
        .all(|r| r.header("connection") == Some("keep-alive")));
    assert!(buf.is_empty() && closed_within(&mut s, Duration::from_secs(5)));
}

/// Against the server binary: resident memory is measured in a process
/// of its own, not in this one, where other tests run at the same time.
#[test]
fn clients_that_never_read_cost_bounded_memory_and_are_closed() {
    let server = Spawned::start(&SHORT_TIMEOUTS);
    let served = || {
        let mut s = server.connect();
        s.write_all(b"GET /end-string/3 HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let r = read_response(&mut s, &mut Vec::new(), false).unwrap();
        r.status == 200 && r.body == b"aaa"
    };
    assert!(served());
    // Warm-up: the body is cached before memory is measured.
    assert_eq!(server.get("/end-string/102400").status, 200);
    let before = server.rss();
    let batch = "GET /end-string/102400 HTTP/1.1\r\nHost: t\r\n\r\n".repeat(200);
    let mut hostile: Vec<TcpStream> = (0..100)
        .map(|_| {
            let s = server.connect();
            s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
            s
        })
        .collect();
    for s in &mut hostile {
        // The server may stop reading (backpressure) before it has all of it.
        let _ = s.write_all(batch.as_bytes());
    }
    crate::common::non_readers_bounded_and_closed("clients", &server, before, served, &mut hostile);
}

#[test]
fn sigterm_under_load_completes_every_response_and_exits_zero() {
    sigterm_under_load(None);
}

/// The same over HTTPS: every response received is whole, and each
/// connection ends with `close_notify` (rustls reports a close without one
/// as an error, which fails the load thread).
#[test]
fn sigterm_under_load_over_tls_completes_every_response_and_exits_zero() {
    sigterm_under_load(Some(&Cert::new("sigterm")));
}

/// Sends SIGTERM to `child`.
fn sigterm(child: &std::process::Child) {
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
}

/// Waits for `child`, signalled at `killed`, to exit with status 0 within
/// `within` of it.
fn exits_zero_within(child: &mut std::process::Child, killed: Instant, within: Duration) {
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(killed.elapsed() < within, "did not exit within {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "exit status {status}");
}

/// SIGTERM to the server binary while four keep-alive clients (bodies of
/// 10 B to 300 KB) ask as fast as they can, cleartext or over `tls`.
fn sigterm_under_load(tls: Option<&Cert>) {
    let mut args = vec![
        "--workers".to_string(),
        "2".into(),
        "--grace".into(),
        "5".into(),
    ];
    args.extend(tls.map(Cert::args).unwrap_or_default());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (mut child, addr) = crate::common::spawn_server(&args);
    let load: Vec<_> = (0..4)
        .map(|i| {
            let addr = addr.clone();
            let der = tls.map(|c| c.der.clone());
            std::thread::spawn(move || {
                let len = [10, 5000, 70000, 300000][i];
                let mut complete = 0u64;
                let tcp = TcpStream::connect(&addr).unwrap();
                tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut s: Box<dyn Duplex> = match &der {
                    Some(der) => Box::new(crate::common::tls::over(tcp, der)),
                    None => Box::new(tcp),
                };
                let req = format!("GET /end-string/{len} HTTP/1.1\r\nHost: t\r\n\r\n");
                let mut buf = Vec::new();
                loop {
                    if s.write_all(req.as_bytes()).is_err() {
                        break;
                    }
                    match read_response(&mut s, &mut buf, false) {
                        Ok(r) => {
                            assert_eq!(r.body.len(), len, "a response cut short");
                            complete += 1;
                        }
                        // Closed between responses: nothing half-received,
                        // and over TLS a clean close (close_notify).
                        Err(e) => {
                            assert!(
                                buf.is_empty(),
                                "partial response at close: {e}, {} bytes",
                                buf.len()
                            );
                            // rustls's error for a close without one.
                            assert!(!e.to_string().contains("close_notify"), "{e}");
                            break;
                        }
                    }
                }
                complete
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(700));
    let killed = Instant::now();
    sigterm(&child);
    exits_zero_within(&mut child, killed, Duration::from_secs(10));
    let counts: Vec<u64> = load.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(
        counts.iter().all(|&c| c > 0),
        "every load thread was served: {counts:?}"
    );
}

#[test]
fn connections_past_the_limit_wait_in_the_backlog_until_one_closes() {
    let server = start_demo(Config {
        max_connections: 2,
        ..config(Strategy::Direct)
    })
    .unwrap();
    let req = b"GET /end-string/3 HTTP/1.1\r\nHost: t\r\n\r\n";
    // Both in the middle of a head: busy, so neither gives way.
    let mut first = connect(&server);
    let mut second = connect(&server);
    for s in [&mut first, &mut second] {
        s.write_all(&req[..10]).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    // The third connection is accepted by the kernel, not by the server.
    let mut third = connect(&server);
    third.write_all(req).unwrap();
    third
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut probe = [0u8; 1];
    assert!(
        third.read(&mut probe).is_err(),
        "served past the connection limit"
    );
    drop(first);
    third
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let r = read_response(&mut third, &mut Vec::new(), false).unwrap();
    assert_eq!(r.body, b"aaa", "served once a slot is free");
    second.write_all(&req[10..]).unwrap();
    let r = read_response(&mut second, &mut Vec::new(), false).unwrap();
    assert_eq!(r.body, b"aaa", "the busy one kept");
}

/// At the limit, the connection idle longest gives way to a new one (as
/// nginx closes idle keep-alive connections when it runs out): with four
/// allowed, held by keep-alive clients that each ask something every
/// 300 ms, a new client is answered at once, where it used to wait for an
/// idle timeout (30 s here) or, with clients this busy, for ever.
#[test]
fn idle_connections_give_way_at_the_connection_limit() {
    let server = start_demo(Config {
        max_connections: 4,
        idle_timeout: Duration::from_secs(30),
        ..config(Strategy::Direct)
    })
    .unwrap();
    let req = b"GET /end-string/3 HTTP/1.1\r\nHost: t\r\n\r\n";
    let mut held: Vec<TcpStream> = (0..4).map(|_| connect(&server)).collect();
    for s in &mut held {
        s.write_all(req).unwrap();
        read_response(s, &mut Vec::new(), false).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    // The first has been idle longest.
    for round in 0..3 {
        std::thread::sleep(Duration::from_millis(300));
        for s in held.iter_mut().skip(1) {
            s.write_all(req).unwrap();
            read_response(s, &mut Vec::new(), false).unwrap();
        }
        let mut new = connect(&server);
        new.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let begun = Instant::now();
        new.write_all(req).unwrap();
        let r = read_response(&mut new, &mut Vec::new(), false);
        let r = r.unwrap_or_else(|e| panic!("round {round}: not answered: {e}"));
        assert_eq!(r.body, b"aaa", "round {round}");
        assert!(
            begun.elapsed() < Duration::from_secs(2),
            "round {round}: answered after {:?}",
            begun.elapsed()
        );
        // The one idle longest was closed; the busier ones were not.
        if round == 0 {
            assert!(closed_within(&mut held[0], Duration::from_secs(2)));
        }
        held[0] = new;
    }
    for s in held.iter_mut().skip(1) {
        s.write_all(req).unwrap();
        assert_eq!(
            read_response(s, &mut Vec::new(), false).unwrap().body,
            b"aaa"
        );
    }
}

#[test]
fn each_pipelined_head_has_a_deadline_of_its_own() {
    // --head-timeout 2s. Head #2 arrives split at t=0 and t=1.2; head #3
    // begins at t=1.2 and ends at t=2.5: 1.3 s after its first byte, well
    // inside its own deadline, though 2.5 s after head #2 began.
    let server = start_demo(Config {
        head_timeout: Duration::from_secs(2),
        ..config(Strategy::Direct)
    })
    .unwrap();
    let mut s = connect(&server);
    s.write_all(b"GET /end-string/1 HTTP/1.1\r\nHost: t\r\n\r\nGET /end-string/2 HTTP/1.1\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    s.write_all(b"Host: t\r\n\r\nGET /end-string/3 HTTP/1.1\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(1300));
    s.write_all(b"Host: t\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    for len in 1..=3 {
        let r = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!((r.status, r.body.len()), (200, len), "response {len}");
    }
}

/// Reads `rate` bytes a second from `s`, a tenth at a time, for `time`;
/// the bytes read, or the error that ended the reading.
fn read_steadily(s: &mut impl Read, rate: usize, time: Duration) -> io::Result<usize> {
    let begun = Instant::now();
    let mut piece = vec![0u8; rate / 10];
    let mut read = 0;
    while begun.elapsed() < time {
        s.read_exact(&mut piece)?;
        read += piece.len();
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(read)
}

/// Reads `s` to its end: whether it ended in a reset.
fn ends_in_reset(s: &mut (impl Read + ?Sized)) -> bool {
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => return false,
            Ok(_) => {}
            Err(e) => return e.kind() == io::ErrorKind::ConnectionReset,
        }
    }
}

/// A connection whose 16 KiB receive buffer reopens its window in small
/// steps: at 50 KB/s the peer acknowledges data every few hundred
/// milliseconds. (Loopback's 64 KiB segments reopen a default buffer's
/// window about half of it at a time, seconds apart at this rate: no
/// acknowledgement for a second then is the truth, not a stalled reader.)
fn small_window_connection(server: &Running<Site>) -> TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.set_recv_buffer_size(16 * 1024).unwrap();
    s.connect(&server.addr().into()).unwrap();
    s.into()
}

/// Progress is what the client takes: a reader at a steady 50 KB/s keeps
/// its connection however full the server's socket buffer is (it used to
/// be reset at `--send-timeout`, the kernel waking the writer only once a
/// third of a 4 MB buffer had drained), over TCP and TLS alike; a reader
/// that stops is still reset at the timeout.
#[test]
fn a_steady_slow_reader_is_never_reset_and_a_stopped_one_is() {
    let cert = Cert::new("slow-reader");
    for tls in [false, true] {
        let config = match tls {
            false => short_timeouts(),
            true => Config {
                send_timeout: Duration::from_secs(1),
                min_send_rate_grace: Duration::from_secs(1),
                ..cert.config(Strategy::Direct)
            },
        };
        let server = start_demo(config).unwrap();
        let tcp = small_window_connection(&server);
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut s: Box<dyn Duplex> = match tls {
            false => Box::new(tcp),
            true => Box::new(crate::common::tls::over(tcp, &cert.der)),
        };
        s.write_all(b"GET /large/16MiB HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let read = read_steadily(&mut s, 50_000, Duration::from_secs(4));
        assert!(read.is_ok(), "tls {tls}: a steady reader cut: {read:?}");
        // Stopped past the send timeout, three times the longest wait
        // between its steps (TLS records: up to a second) and the grace.
        std::thread::sleep(Duration::from_secs(6));
        assert!(ends_in_reset(&mut s), "tls {tls}: a stopped reader kept");
    }
}

#[test]
fn a_send_timeout_resets_the_connection() {
    let server = start_demo(short_timeouts()).unwrap();
    let mut s = connect(&server);
    // Enough responses to fill both socket buffers, then never read.
    let batch = "GET /end-string/1048576 HTTP/1.1\r\nHost: t\r\n\r\n".repeat(16);
    s.write_all(batch.as_bytes()).unwrap();
    std::thread::sleep(Duration::from_secs(3));
    // The server gave up at its send timeout and reset the connection: the
    // unsent bytes are discarded, and reading ends in a reset, not a clean
    // end of stream after the buffered bytes.
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut chunk = vec![0u8; 1 << 20];
    let outcome = loop {
        match s.read(&mut chunk) {
            Ok(0) => break "clean end of stream",
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => break "reset",
            Err(e) => panic!("read: {e}"),
        }
    };
    assert_eq!(outcome, "reset");
}

/// A connection to `server` with a receive buffer of `rcvbuf` bytes (0: the
/// system's own, autotuned).
fn connection_with_buffer(server: &Running<Site>, rcvbuf: usize) -> TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    if rcvbuf > 0 {
        s.set_recv_buffer_size(rcvbuf).unwrap();
    }
    s.connect(&server.addr().into()).unwrap();
    let s: TcpStream = s.into();
    s.set_read_timeout(Some(Duration::from_secs(40))).unwrap();
    s
}

/// How a reader of a long body takes it.
#[derive(Clone, Copy, Debug)]
enum Reader {
    /// `piece` bytes every `every`, for `time`.
    Steady {
        piece: usize,
        every: Duration,
        time: Duration,
    },
    /// Steady at 25 KB/s for 3 s, quiet for `pause`, steady for 3 s more.
    Pausing { pause: Duration },
    /// 100 KB read, then nothing for 12 s.
    Stopped,
}

/// Sends `GET /large/64MiB` on `s` and reads it as `reader` does: whether
/// the connection was reset, and after how long.
fn read_as(s: &mut dyn Duplex, reader: Reader) -> (bool, Duration) {
    s.write_all(b"GET /large/64MiB HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let begun = Instant::now();
    let steady = |s: &mut dyn Duplex, piece: usize, every: Duration, time: Duration| {
        let mut buf = vec![0u8; piece];
        let until = Instant::now() + time;
        while Instant::now() < until {
            s.read_exact(&mut buf)?;
            std::thread::sleep(every);
        }
        Ok::<(), io::Error>(())
    };
    let kb = Duration::from_millis(40);
    let read = match reader {
        Reader::Steady { piece, every, time } => steady(s, piece, every, time),
        Reader::Pausing { pause } => steady(s, 1024, kb, Duration::from_secs(3)).and_then(|()| {
            std::thread::sleep(pause);
            steady(s, 1024, kb, Duration::from_secs(3))
        }),
        Reader::Stopped => {
            let mut buf = vec![0u8; 100_000];
            s.read_exact(&mut buf).unwrap();
            // Past any rule's time (3 s, or 3 × the longest wait between
            // steps, and 2 s of grace), then what was sent is read.
            std::thread::sleep(Duration::from_secs(12));
            return (ends_in_reset(s), begun.elapsed());
        }
    };
    match read {
        Ok(()) => (false, begun.elapsed()),
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => (true, begun.elapsed()),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => (true, begun.elapsed()),
        Err(e) => panic!("{reader:?}: {e}"),
    }
}

/// Progress is what the client acknowledges, judged by two rules: a
/// reader above `--min-send-rate` keeps its connection whatever its
/// receive buffer, read size and rate (its window reopening in steps
/// seconds apart on loopback), and so does one that pauses for less than
/// `--send-timeout`; one that stops is reset, and so is one that trickles
/// below the rate, over TCP and TLS; each reset below the rate counted.
#[test]
fn readers_above_the_minimum_rate_are_kept_and_stopped_or_slower_ones_reset() {
    let cert = Cert::new("pace");
    let tuned = |config: Config| Config {
        send_timeout: Duration::from_secs(3),
        min_send_rate: 1000,
        min_send_rate_grace: Duration::from_secs(2),
        ..config
    };
    let server = start_demo(tuned(config(Strategy::Direct))).unwrap();
    let tls = start_demo(tuned(cert.config(Strategy::Direct))).unwrap();
    let ms = Duration::from_millis;
    let secs = Duration::from_secs;
    let steady = |piece, every, time| Reader::Steady { piece, every, time };
    // (receive buffer, reader, over TLS, reset expected)
    let cases = [
        (2 << 10, steady(64, ms(20), secs(10)), false, false),
        (64 << 10, steady(1024, ms(40), secs(10)), false, false),
        (64 << 10, steady(1024, ms(40), secs(10)), true, false),
        (1 << 20, steady(16 << 10, ms(160), secs(10)), false, false),
        (0, steady(4096, ms(100), secs(10)), false, false),
        (16 << 10, Reader::Pausing { pause: ms(2000) }, false, false),
        (2 << 10, Reader::Stopped, false, true),
        (64 << 10, Reader::Stopped, false, true),
        (1 << 20, Reader::Stopped, false, true),
        (64 << 10, Reader::Stopped, true, true),
        // Below the rate: 256 bytes a second. (Over TLS, a client takes a
        // 16 KiB record from TCP at a time: what it acknowledges is whole
        // records, one a minute at this rate, judged as a stopped reader.)
        (2 << 10, steady(256, ms(1000), secs(40)), false, true),
    ];
    let threads: Vec<_> = cases
        .into_iter()
        .map(|(rcvbuf, reader, over_tls, _)| {
            let tcp = connection_with_buffer(if over_tls { &tls } else { &server }, rcvbuf);
            let der = cert.der.clone();
            std::thread::spawn(move || {
                let mut s: Box<dyn Duplex> = match over_tls {
                    false => Box::new(tcp),
                    true => Box::new(crate::common::tls::over(tcp, &der)),
                };
                read_as(&mut *s, reader)
            })
        })
        .collect();
    for (thread, (rcvbuf, reader, over_tls, reset)) in threads.into_iter().zip(cases) {
        let (was_reset, after) = thread.join().unwrap();
        eprintln!("buffer {rcvbuf}, {reader:?}, tls {over_tls}: reset {was_reset} after {after:?}");
        assert_eq!(
            was_reset, reset,
            "buffer {rcvbuf}, {reader:?}, tls {over_tls}: reset {was_reset} after {after:?}"
        );
    }
    let transport = |s: &Running<Site>| s.stack().connections().transport.clone();
    let (tcp, tls) = (transport(&server), transport(&tls));
    let counts = (tcp.too_slow(), tcp.send_timeouts());
    assert_eq!(counts, (1, 3), "the trickle below the rate, the stopped");
    assert_eq!((tls.too_slow(), tls.send_timeouts()), (0, 1), "the stopped");
}

/// `--shutdown-delay`: after SIGTERM the server goes on accepting and
/// serving new connections for the delay (a load balancer still sends
/// them), `/healthz` answering 503 and each response closing its
/// connection; then the listener closes and the server exits. Four
/// clients opening a connection per request see no connection refused
/// and no request unanswered during the delay.
#[test]
fn a_shutdown_delay_serves_new_connections_after_sigterm() {
    let (mut child, addr) =
        crate::common::spawn_server(&["--workers", "2", "--shutdown-delay", "2s", "--grace", "2s"]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load: Vec<_> = (0..4)
        .map(|_| {
            let (addr, stop) = (addr.clone(), stop.clone());
            std::thread::spawn(move || {
                let (mut served, mut closing) = (0u64, 0u64);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let mut s = TcpStream::connect(&addr).expect("a connection refused");
                    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                    s.write_all(b"GET /end-string/3 HTTP/1.1\r\nHost: t\r\n\r\n")
                        .unwrap();
                    let r = read_response(&mut s, &mut Vec::new(), false).expect("an answer");
                    assert_eq!((r.status, &r.body[..]), (200, &b"aaa"[..]));
                    served += 1;
                    closing += u64::from(r.header("connection") == Some("close"));
                }
                (served, closing)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let killed = Instant::now();
    sigterm(&child);
    std::thread::sleep(Duration::from_millis(300));
    let mut probe = TcpStream::connect(&addr).unwrap();
    probe
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let health = read_response(&mut probe, &mut Vec::new(), false).unwrap();
    assert_eq!(health.status, 503, "/healthz during the delay");
    // Most of the delay under load, then the load stops before it ends.
    std::thread::sleep(Duration::from_millis(1400));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let counts: Vec<(u64, u64)> = load.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(
        killed.elapsed() < Duration::from_secs(2),
        "the load outlasted the delay"
    );
    assert!(counts.iter().all(|&(_, closing)| closing > 0), "{counts:?}");
    exits_zero_within(&mut child, killed, Duration::from_secs(8));
    assert!(
        killed.elapsed() >= Duration::from_secs(2),
        "exited before the delay"
    );
    eprintln!("served during the delay: {counts:?}");
}
