//! Helpers shared by the server tests: starting servers on port 0, a small
//! raw HTTP/1.1 client, the expected bodies computed independently of
//! the server's code, and sessions driven in memory, on the demo or on a
//! trivial service (`trivial.rs`) that leaves only the core to test.
#![allow(dead_code)] // each test binary uses a different part

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::BytesMut;
use sha2::{Digest, Sha256};
use unflat::queue::WriteQueue;
use unflat_server::service::Service;
use unflat_server::session::{Session, Step};
use unflat_server::{Config, Running, Stack, Strategy};

/// The binary's demo site, built into the tests as the binary builds it:
/// the suite drives its routes; each test uses a part of it.
#[path = "../../src/demo/mod.rs"]
#[allow(dead_code)]
pub mod demo;
pub mod haproxy;
pub mod tls;
pub mod trivial;

pub use demo::Site;

use trivial::Trivial;

/// A configuration for tests: 127.0.0.1 port 0, two workers.
pub fn config(strategy: Strategy) -> Config {
    Config {
        addr: "127.0.0.1:0".parse().unwrap(),
        workers: Some(2),
        strategy,
        ..Config::default()
    }
}

/// Starts a server; it stops when dropped.
pub fn start(strategy: Strategy) -> Running<Site> {
    start_demo(config(strategy)).expect("server starts")
}

/// Starts the demo with `config` and its default options on a thread of its
/// own; it stops when dropped.
pub fn start_demo(config: Config) -> std::io::Result<Running<Site>> {
    start_demo_with(config, demo::Options::default())
}

/// Starts the demo with `config` and `options`, as the binary checks and
/// makes it, on a thread of its own; it stops when dropped.
pub fn start_demo_with(config: Config, options: demo::Options) -> std::io::Result<Running<Site>> {
    let invalid = |e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
    options.validate(&config).map_err(invalid)?;
    Running::start_with(config, |m| Site::made(&options, m))
}

/// Connects with a read timeout, so that a broken server fails the test
/// instead of hanging it.
pub fn connect<S: Service>(server: &Running<S>) -> TcpStream {
    let s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// The body `/end-string/{len}?kind={kind}` must have.
pub fn end_string_body(len: usize, kind: &str) -> Vec<u8> {
    let c = match kind {
        "ascii" => "a",
        "latin1" => "é",
        "twobyte" => "€",
        _ => panic!("unknown kind {kind}"),
    };
    c.repeat(len).into_bytes()
}

/// The `/large/{size}` payload, written from its description: 0x61, with
/// the little-endian u32 offset at every 4 KiB boundary.
pub fn large_body(size: usize) -> Vec<u8> {
    let mut v = vec![0x61u8; size];
    let mut at = 0;
    while at < size {
        for (i, b) in (at as u32).to_le_bytes().iter().enumerate() {
            if at + i < size {
                v[at + i] = *b;
            }
        }
        at += 4096;
    }
    v
}

/// Hex SHA-256.
pub fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A response as read off the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Raw {
    pub status: u16,
    pub version: u8,
    pub headers: Vec<(String, Vec<u8>)>,
    /// The head exactly as received.
    pub head: Vec<u8>,
    pub body: Vec<u8>,
}

impl Raw {
    /// The value of the one header called `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        let mut it = self
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name));
        let v = it.next().map(|(_, v)| std::str::from_utf8(v).unwrap());
        assert!(it.next().is_none(), "{name} sent twice");
        v
    }

    /// Head and body, with the Date value blanked, for comparing servers.
    pub fn without_date(&self) -> String {
        let text = String::from_utf8_lossy(&self.head).into_owned();
        let mut out: Vec<u8> = text
            .split("\r\n")
            .map(|l| {
                if l.starts_with("Date: ") {
                    "Date: *"
                } else {
                    l
                }
            })
            .collect::<Vec<_>>()
            .join("\r\n")
            .into_bytes();
        out.extend_from_slice(&self.body);
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// Reads one response from `stream`, with `buf` holding bytes already read
/// past earlier responses. `head_request`: the body is not sent.
pub fn read_response(
    stream: &mut impl Read,
    buf: &mut Vec<u8>,
    head_request: bool,
) -> io::Result<Raw> {
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut res = httparse::Response::new(&mut headers);
        match res.parse(buf) {
            Ok(httparse::Status::Complete(n)) => {
                let status = res.code.unwrap();
                let version = res.version.unwrap();
                let headers: Vec<(String, Vec<u8>)> = res
                    .headers
                    .iter()
                    .map(|h| (h.name.to_string(), h.value.to_vec()))
                    .collect();
                let length: usize = headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                    .map_or(0, |(_, v)| std::str::from_utf8(v).unwrap().parse().unwrap());
                let length = if head_request || status < 200 || status == 204 || status == 304 {
                    0
                } else {
                    length
                };
                while buf.len() < n + length {
                    fill(stream, buf)?;
                }
                let head = buf[..n].to_vec();
                let body = buf[n..n + length].to_vec();
                buf.drain(..n + length);
                return Ok(Raw {
                    status,
                    version,
                    headers,
                    head,
                    body,
                });
            }
            Ok(httparse::Status::Partial) => fill(stream, buf)?,
            Err(e) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{e}: {:?}", String::from_utf8_lossy(buf)),
                ))
            }
        }
    }
}

fn fill(stream: &mut impl Read, buf: &mut Vec<u8>) -> io::Result<()> {
    let mut chunk = [0u8; 64 * 1024];
    let n = stream.read(&mut chunk)?;
    if n == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    buf.extend_from_slice(&chunk[..n]);
    Ok(())
}

/// Sends `request` on a new connection and reads one response.
pub fn exchange<S: Service>(server: &Running<S>, request: &[u8]) -> Raw {
    let mut s = connect(server);
    s.write_all(request).unwrap();
    let head = request.starts_with(b"HEAD ");
    read_response(&mut s, &mut Vec::new(), head).unwrap()
}

/// True when the server closed the connection: EOF with nothing more sent.
pub fn closed(stream: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    let mut rest = Vec::new();
    match stream.read_to_end(&mut rest) {
        Ok(_) => {
            buf.extend_from_slice(&rest);
            buf.is_empty()
        }
        Err(e) => e.kind() == io::ErrorKind::ConnectionReset,
    }
}

/// True when the peer closed: EOF or reset, each read waiting at most
/// `within` (whatever was still in flight is drained).
pub fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 65536];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// The flags of a server binary that gives up on a client after about a
/// second: the head, idle, send and body timeouts and the send rate's grace.
pub const SHORT_TIMEOUTS: [&str; 12] = [
    "--workers",
    "2",
    "--head-timeout",
    "1s",
    "--idle-timeout",
    "1s",
    "--send-timeout",
    "1s",
    "--min-send-rate-grace",
    "1s",
    "--body-timeout",
    "1s",
];

/// The end of a test of clients that never read, `sockets` (their TCP
/// connections) to `server` (started with [`SHORT_TIMEOUTS`]), begun when
/// its resident memory was `before`: a reading client is `served`
/// throughout, memory grew by less than 64 MiB, and once the send timeout
/// has passed the server has closed every one of them.
pub fn non_readers_bounded_and_closed(
    what: &str,
    server: &Spawned,
    before: u64,
    served: impl Fn() -> bool,
    sockets: &mut [TcpStream],
) {
    for _ in 0..5 {
        assert!(served());
        std::thread::sleep(Duration::from_millis(100));
    }
    let growth = server.rss().saturating_sub(before);
    eprintln!(
        "memory growth with {} non-reading {what}: {:.1} MiB",
        sockets.len(),
        growth as f64 / 1048576.0
    );
    assert!(growth < 64 << 20, "grew {} MiB", growth >> 20);
    // The send timeout closes them: a peer that then reads sees the end of
    // the stream (after whatever the socket buffers held).
    std::thread::sleep(Duration::from_secs(3));
    let closed = sockets
        .iter_mut()
        .map(|s| closed_within(s, Duration::from_secs(10)))
        .filter(|&c| c)
        .count();
    assert_eq!(closed, sockets.len());
    assert!(served());
}

/// The demo server's layers with the default configuration (direct
/// strategy), for driving sessions in memory: for tests of its routes.
pub fn app() -> Stack<Site> {
    demo_stack(config(Strategy::Direct))
}

/// The demo's layers with `config` and its default options, listening
/// nowhere: for driving sessions in memory, and for its counters.
pub fn demo_stack(config: Config) -> Stack<Site> {
    let options = demo::Options::default();
    let address = "127.0.0.1:0".parse().unwrap();
    Stack::with_service(config, address, None, |m| Site::made(&options, m))
}

/// The longest `/n` body of [`trivial()`], in characters.
pub const TRIVIAL_LONGEST: usize = 4 << 20;

/// The layers of a server of the [`Trivial`] service with the default
/// configuration (direct strategy), for driving the core in memory.
pub fn trivial() -> Stack<Trivial> {
    Stack::with_service(
        config(Strategy::Direct),
        "127.0.0.1:0".parse().unwrap(),
        None,
        |_| Trivial::new(TRIVIAL_LONGEST),
    )
}

/// Feeds `parts` one after the other, as separate reads, to a new sans-IO
/// session; returns all its output and whether it closed.
pub fn serve_in_memory<S: Service>(app: &Stack<S>, parts: &[&[u8]]) -> (Vec<u8>, bool) {
    let mut session = Session::new(app.protocol());
    let mut queue = WriteQueue::new();
    let mut input = BytesMut::new();
    let mut out = Vec::new();
    for part in parts {
        input.extend_from_slice(part);
        loop {
            let step = session.process(&mut input, &mut queue, app.protocol());
            queue.write_to(&mut out).unwrap();
            match step {
                Step::Flush => continue,
                Step::Defer(job) => session.resume(job.wait()),
                Step::Wait => session.wait(),
                Step::Close | Step::Reset => return (out, true),
                Step::Read(_) => break,
            }
        }
    }
    (out, false)
}

/// The output with every Date value blanked (it changes with the clock).
pub fn undated(out: &[u8]) -> Vec<u8> {
    let mut v = out.to_vec();
    let mut at = 0;
    while let Some(i) = v[at..].windows(8).position(|w| w == b"\r\nDate: ") {
        let start = at + i + 8;
        v[start..start + 29].fill(b'*');
        at = start;
    }
    v
}

/// The server binary: `UNFLAT_SERVER_BIN` when set (`.ci/run` points it at
/// the optimised build), else the one cargo built for these tests.
pub fn server_binary() -> String {
    std::env::var("UNFLAT_SERVER_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_unflat-server").to_string())
}

/// Starts the server binary on port 0 with `args` (logs at warn); returns
/// it and its address, read from the banner. The rest of its stdout is
/// drained, so that the server never writes to a closed pipe.
pub fn spawn_server(args: &[&str]) -> (std::process::Child, String) {
    let mut child = std::process::Command::new(server_binary())
        .args(["--addr", "127.0.0.1:0"])
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let addr = banner_address(&mut child).expect("no banner");
    (child, addr)
}

/// The server binary on port 0, stopped when dropped: for measuring its
/// memory apart from this process, where other tests run at the same time.
pub struct Spawned {
    /// The server's process.
    pub child: std::process::Child,
    /// Its address.
    pub addr: SocketAddr,
}

impl Spawned {
    /// Starts the server binary with `args` (see [`spawn_server`]).
    pub fn start(args: &[&str]) -> Spawned {
        let (child, addr) = spawn_server(args);
        Spawned {
            child,
            addr: addr.parse().unwrap(),
        }
    }

    /// Its resident memory, in bytes.
    pub fn rss(&self) -> u64 {
        proc_status_bytes(&self.child.id().to_string(), "VmRSS:")
    }

    /// Its peak resident memory, in bytes.
    pub fn peak(&self) -> u64 {
        proc_status_bytes(&self.child.id().to_string(), "VmHWM:")
    }

    /// A connection to it, with a read timeout.
    pub fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.set_nodelay(true).unwrap();
        s
    }

    /// One response to `GET path` on a new connection.
    pub fn get(&self, path: &str) -> Raw {
        let mut s = self.connect();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        read_response(&mut s, &mut Vec::new(), false).unwrap()
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The address in the banner of a server started with its stdout piped
/// (`http://ADDR` or `https://ADDR`), the rest of its stdout drained from
/// then on, so that the server never writes to a closed pipe; `None` when
/// its stdout ends without a banner (it could not listen).
pub fn banner_address(child: &mut std::process::Child) -> Option<String> {
    use std::io::BufRead;
    let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout piped"));
    let mut line = String::new();
    let addr = loop {
        line.clear();
        if out.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        if let Some(at) = line
            .find("http://")
            .map(|at| at + 7)
            .or_else(|| line.find("https://").map(|at| at + 8))
        {
            break line[at..].trim().to_string();
        }
    };
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    Some(addr)
}

/// A field of /proc/PID/status (`VmRSS:`, `VmHWM:`), in bytes; `self` for
/// this process.
pub fn proc_status_bytes(pid: &str, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    kib * 1024
}
