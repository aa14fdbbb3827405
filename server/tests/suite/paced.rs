//! Paced streams (`/end-string/{len}?chunks=K&every=MS`) held to their cap
//! by the clock, and giving way at the connection limit: a schedule, not a
//! wait after each chunk, so the timer's tick cannot stretch a stream past
//! `K × MS`; and a stream waiting for its next chunk gives its connection
//! up to a new client as an idle keep-alive connection does.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::{read_response, Spawned};

/// 3 000 chunks a millisecond apart take about 3 s, not a timer tick each
/// (70–83 chunks a second: ~40 s).
#[test]
fn a_stream_paced_below_the_timers_tick_keeps_its_schedule() {
    let server = Spawned::start(&["--workers", "1"]);
    let mut s = server.connect();
    let begun = Instant::now();
    s.write_all(b"GET /end-string/3000?chunks=3000&every=1 HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    while !out.ends_with(b"\r\n0\r\n\r\n") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed before the last chunk");
        out.extend_from_slice(&buf[..n]);
    }
    let took = begun.elapsed();
    eprintln!("3 000 chunks 1 ms apart: {took:?}");
    // The schedule starts at the coarse clock's reading, which lags the
    // client's by up to a tick (4 ms at HZ=250, 10 ms at HZ=100): the last
    // chunk may leave that much before 2 999 ms after the request.
    assert!(took >= Duration::from_millis(2_999 - 10), "{took:?}");
    assert!(took < Duration::from_secs(6), "{took:?}");
}

/// 16 streams waiting for their next chunk hold all 16 connections a
/// server allows: a new client's `/healthz` is answered within a second,
/// one stream giving way — cut as every stream is, with no last chunk.
#[test]
fn streams_that_wait_give_way_at_the_connection_limit() {
    let server = Spawned::start(&["--workers", "1", "--max-connections", "16"]);
    let addr = server.addr;
    let mut streams = Vec::new();
    for _ in 0..16 {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"GET /end-string/50?chunks=50&every=1000 HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let mut first = [0u8; 256];
        let n = s.read(&mut first).unwrap();
        assert!(first[..n].starts_with(b"HTTP/1.1 200"));
        streams.push(s);
    }
    let begun = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let r = read_response(&mut s, &mut Vec::new(), false).expect("answered within 1 s");
    assert_eq!(r.status, 200);
    assert!(begun.elapsed() < Duration::from_secs(1));
    // The one that gave way ended without its last chunk.
    let mut cut = 0;
    for mut s in streams {
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut rest = Vec::new();
        match s.read_to_end(&mut rest) {
            Ok(_) | Err(_) if rest.ends_with(b"0\r\n\r\n") => panic!("a last chunk"),
            Ok(_) => cut += 1,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => cut += 1,
            Err(_) => {} // still streaming
        }
    }
    assert!(cut >= 1, "a stream gave way");
}
