//! `--min-send-rate` cannot be banked: a fast start buys one window of
//! time — what the client's receive window holds at the rate — not its
//! bytes' worth. A reader that takes 4 MB at once and then half the
//! minimum rate is reset soon after; readers at the rate, through small
//! and large receive buffers, are kept.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::config;
use crate::common::{start_demo, Site};
use unflat_server::{Config, Running, Strategy};

/// The rate these tests hold readers to.
const RATE: u64 = 20_000;

/// A connection to `server` with a receive buffer of `rcvbuf` bytes (0: the
/// system's own, autotuned), that asks for a long body.
fn reader(server: &Running<Site>, rcvbuf: usize) -> TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    if rcvbuf > 0 {
        s.set_recv_buffer_size(rcvbuf).unwrap();
    }
    s.connect(&server.addr().into()).unwrap();
    let mut s: TcpStream = s.into();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(b"GET /large/64MiB HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    s
}

/// Reads `piece` bytes every `every` for `time`: when the connection was
/// reset, if it was.
fn steadily(s: &mut TcpStream, piece: usize, every: Duration, time: Duration) -> Option<Duration> {
    let begun = Instant::now();
    let mut buf = vec![0u8; piece];
    while begun.elapsed() < time {
        match s.read_exact(&mut buf) {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::UnexpectedEof
                ) =>
            {
                return Some(begun.elapsed())
            }
            Err(e) => panic!("{e}"),
        }
        std::thread::sleep(every);
    }
    None
}

/// With `--min-send-rate 20000`: a reader through a 16 KiB buffer that
/// takes 4 MB as fast as it comes (200 s of credit at the rate, all of it
/// kept before) and then 10 KB/s is reset within seconds of slowing; at
/// 50 KB/s (2 KiB every 40 ms, slower when the machine is busy) through
/// 16 KiB, 64 KiB and the system's own buffer, kept.
#[test]
fn a_fast_start_buys_one_window_and_readers_at_the_rate_are_kept() {
    let server = start_demo(Config {
        send_timeout: Duration::from_secs(3),
        min_send_rate: RATE,
        min_send_rate_grace: Duration::from_secs(1),
        ..config(Strategy::Direct)
    })
    .unwrap();
    let ms = Duration::from_millis;
    // Through a 16 KiB buffer, so that the reset is seen soon after it is
    // sent (a client reads what its buffer holds before the reset).
    let banked = {
        let mut s = reader(&server, 16 << 10);
        std::thread::spawn(move || {
            let mut fast = vec![0u8; 4 << 20];
            s.read_exact(&mut fast).unwrap();
            steadily(&mut s, 1024, ms(100), Duration::from_secs(25))
        })
    };
    let kept: Vec<_> = [16 << 10, 64 << 10, 0]
        .into_iter()
        .map(|rcvbuf| {
            let mut s = reader(&server, rcvbuf);
            std::thread::spawn(move || {
                let reset = steadily(&mut s, 2048, ms(40), Duration::from_secs(15));
                (rcvbuf, reset)
            })
        })
        .collect();
    let cut = banked.join().unwrap().expect("the banked reader reset");
    eprintln!("the banked reader reset {cut:?} after it slowed");
    assert!(cut < Duration::from_secs(15), "{cut:?}");
    for thread in kept {
        let (rcvbuf, reset) = thread.join().unwrap();
        assert_eq!(reset, None, "a reader at 50 KB/s through {rcvbuf} bytes");
    }
    assert_eq!(server.stack().connections().transport.too_slow(), 1);
}
