//! What clients that never read cost the server, for every body form and
//! in total. A test binary of its own, one measurement at a time: resident
//! memory is the whole process's.
//!
//! - Rope bodies: N connections that each ask for a 16 M-character rope
//!   body (each kind) and never read cost the server at most N ×
//!   (`--max-queued-bytes` + one frame) beyond the shared cache, by the
//!   server's own account and by resident memory. They used to cost the
//!   whole body each: every ~1 KiB chunk was copied into the queue.
//! - Many connections: 1000 clients that pipeline 100 requests each and
//!   never read hold the server's queues within `--max-queued-total` plus
//!   one response each, and its peak resident memory stays under 512 MiB
//!   with the default budget; once they close, it comes back within 32 MiB
//!   of idle (the server binary, measured from outside: `.ci/run` runs this
//!   again against the release build).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use std::time::{Duration, Instant};

use common::{config, proc_status_bytes, spawn_server};
use socket2::{Domain, Socket, Type};
use unflat_server::budget::GRANULE;
use unflat_server::{Config, Running, Strategy};

const MIB: u64 = 1 << 20;

/// A connection whose receive buffer is small, so that the server's
/// output stays in its own queue rather than in the kernel's buffers.
fn tight_connection(addr: SocketAddr) -> TcpStream {
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    s.set_recv_buffer_size(4096).unwrap();
    s.connect(&addr.into()).unwrap();
    let s: TcpStream = s.into();
    s.set_nodelay(true).unwrap();
    s
}

/// Waits until `f` gives the same value three times in a row, 200 ms
/// apart (the server has done what it will do), at most 20 s.
fn settled(mut f: impl FnMut() -> u64) -> u64 {
    let begun = Instant::now();
    let mut last = (f(), 0);
    while last.1 < 3 && begun.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(200));
        let now = f();
        last = if now == last.0 {
            (now, last.1 + 1)
        } else {
            (now, 0)
        };
    }
    last.0
}

/// Reads one response to `request` whole, discarding it.
fn read_through(addr: SocketAddr, request: &str) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut head = Vec::new();
    let (head_len, body_len) = loop {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed before the head");
        head.extend_from_slice(&buf[..n]);
        let mut fields = [httparse::EMPTY_HEADER; 16];
        let mut r = httparse::Response::new(&mut fields);
        if let httparse::Status::Complete(len) = r.parse(&head).unwrap() {
            assert_eq!(r.code, Some(200));
            let cl = r
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .map(|h| {
                    std::str::from_utf8(h.value)
                        .unwrap()
                        .parse::<u64>()
                        .unwrap()
                })
                .unwrap();
            break (len, cl);
        }
    };
    let mut left = body_len - (head.len() - head_len) as u64;
    while left > 0 {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed with {left} bytes of the body to come");
        left -= n as u64;
    }
}

fn rope_bodies_cost_at_most_the_queue_bound_per_connection() {
    let config = Config {
        send_timeout: Duration::from_secs(120),
        ..config(Strategy::Direct)
    };
    let (bound, frame) = (config.max_queued_bytes as u64, config.frame as u64);
    let server = Running::start(config).unwrap();
    let addr = server.addr();
    let per_kind = 4;
    for kind in ["ascii", "latin1", "twobyte"] {
        let request =
            format!("GET /end-string/16777216?kind={kind}&body=rope HTTP/1.1\r\nHost: t\r\n\r\n");
        // Warm-up: the body is built and cached.
        read_through(addr, &request);
        let pid = std::process::id().to_string();
        let before = proc_status_bytes(&pid, "VmRSS:");
        let stuck: Vec<TcpStream> = (0..per_kind)
            .map(|_| {
                let mut s = tight_connection(addr);
                s.write_all(request.repeat(2).as_bytes()).unwrap();
                s
            })
            .collect();
        let held = settled(|| server.app().budget.held() as u64);
        let grown = proc_status_bytes(&pid, "VmRSS:").saturating_sub(before);
        let limit = per_kind * (bound + frame);
        eprintln!(
            "{kind} rope, {per_kind} non-readers: queues hold {} KiB, resident memory grew {} KiB (bound {} KiB)",
            held >> 10,
            grown >> 10,
            limit >> 10
        );
        assert!(held <= limit, "{kind}: the queues hold {held} bytes");
        assert!(grown <= limit, "{kind}: resident memory grew {grown} bytes");
        drop(stuck);
        let released = settled(|| server.app().budget.held() as u64);
        assert_eq!(released, 0, "{kind}: closed connections hold nothing");
    }
}

fn a_thousand_non_readers_stay_within_the_global_budget() {
    let (mut child, addr) = spawn_server(&["--send-timeout", "120s", "--workers", "2"]);
    let addr: SocketAddr = addr.parse().unwrap();
    let pid = child.id().to_string();
    let idle = proc_status_bytes(&pid, "VmRSS:");
    let request = "GET /end-string/16384?kind=twobyte HTTP/1.1\r\nHost: t\r\n\r\n".repeat(100);
    let stuck: Vec<TcpStream> = (0..1000)
        .map(|_| {
            let mut s = tight_connection(addr);
            s.write_all(request.as_bytes()).unwrap();
            s
        })
        .collect();
    settled(|| proc_status_bytes(&pid, "VmRSS:"));
    let peak = proc_status_bytes(&pid, "VmHWM:");
    eprintln!(
        "1000 non-readers of 100 × /end-string/16384?kind=twobyte: peak resident memory {} MiB (idle {} MiB)",
        peak / MIB,
        idle / MIB
    );
    drop(stuck);
    // The allocator gives the memory back within seconds (jemalloc's
    // background threads; glibc's malloc kept ~330 MiB here).
    let closed = Instant::now();
    let mut after = proc_status_bytes(&pid, "VmRSS:");
    while after > idle + 32 * MIB && closed.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(500));
        after = proc_status_bytes(&pid, "VmRSS:");
    }
    eprintln!(
        "after they closed: {} MiB, {:.1} s later",
        after / MIB,
        closed.elapsed().as_secs_f64()
    );
    let _ = child.kill();
    let _ = child.wait();
    assert!(peak < 512 * MIB, "peak resident memory {} MiB", peak / MIB);
    assert!(
        after <= idle + 32 * MIB,
        "resident memory still {} MiB 30 s after the clients closed (idle {} MiB)",
        after / MIB,
        idle / MIB
    );
}

fn the_budget_holds_whatever_it_is_set_to() {
    // A small budget, the server in process, so that its own account can
    // be read: past the budget, a connection holds one response (49 152
    // bytes of body, its head) and less than a granule unreported.
    let budget = 16 * MIB;
    let server = Running::start(Config {
        send_timeout: Duration::from_secs(120),
        max_queued_total: budget as usize,
        ..config(Strategy::Direct)
    })
    .unwrap();
    let request = "GET /end-string/16384?kind=twobyte HTTP/1.1\r\nHost: t\r\n\r\n".repeat(100);
    let clients = 500;
    let stuck: Vec<TcpStream> = (0..clients)
        .map(|_| {
            let mut s = tight_connection(server.addr());
            s.write_all(request.as_bytes()).unwrap();
            s
        })
        .collect();
    let held = settled(|| server.app().budget.held() as u64);
    let limit = budget + clients * (49_152 + 512 + GRANULE as u64);
    eprintln!(
        "{clients} non-readers, budget {} MiB: queues hold {} MiB (limit {} MiB)",
        budget / MIB,
        held / MIB,
        limit / MIB
    );
    assert!(held <= limit, "held {held} bytes");
    assert!(held > budget / 2, "the clients were not served: {held}");
    drop(stuck);
    assert_eq!(settled(|| server.app().budget.held() as u64), 0);
}

/// One test: each measurement needs the process (or the server) to itself.
#[test]
fn clients_that_never_read_cost_bounded_memory() {
    rope_bodies_cost_at_most_the_queue_bound_per_connection();
    the_budget_holds_whatever_it_is_set_to();
    a_thousand_non_readers_stay_within_the_global_budget();
}
