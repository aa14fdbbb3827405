//! The examples, run as their built binaries (`cargo test` builds them next
//! to the test executables, in `target/<profile>/examples/`) on port 0:
//! requests over TCP, answers checked byte for byte, then the server killed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// An example server, killed when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the example `name` with `args` and reads its address from the
/// first line it prints, the part after `http://` up to the next `/`.
fn start(name: &str, args: &[&str]) -> Server {
    // target/<profile>/deps/<this test> → target/<profile>/examples/<name>
    let exe = std::env::current_exe().unwrap();
    let path: PathBuf = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join(name);
    assert!(
        path.exists(),
        "{} is not built: a whole `cargo test` builds the examples; before `--test examples` alone, \
         run `cargo build --examples` (with the same features)",
        path.display()
    );
    let mut child = Command::new(&path)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let after = line.split("http://").nth(1).unwrap_or_else(|| {
        let _ = child.kill();
        panic!("{name} printed {line:?}")
    });
    let addr = after.trim().split('/').next().unwrap().parse().unwrap();
    Server { child, addr }
}

/// Sends `request` on a new connection and reads until the server closes
/// it (or stops sending for a few seconds); returns the status, the
/// `Content-Length` and the body.
fn exchange(addr: SocketAddr, request: &[u8]) -> (u16, Option<usize>, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream.write_all(request).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => break,
            Err(e) => panic!("read: {e}"),
        }
        // Stop once a whole response with its Content-Length is in.
        if let Some((code, Some(len), body)) = parse(&out) {
            if body.len() >= len {
                return (code, Some(len), body);
            }
        }
    }
    parse(&out).unwrap_or_else(|| panic!("no response: {:?}", String::from_utf8_lossy(&out)))
}

fn parse(bytes: &[u8]) -> Option<(u16, Option<usize>, Vec<u8>)> {
    let mut fields = [httparse::EMPTY_HEADER; 32];
    let mut res = httparse::Response::new(&mut fields);
    let httparse::Status::Complete(head) = res.parse(bytes).ok()? else {
        return None;
    };
    let len = res
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .map(|h| std::str::from_utf8(h.value).unwrap().parse().unwrap());
    Some((res.code?, len, bytes[head..].to_vec()))
}

#[test]
fn std_server_answers_every_request_target() {
    let server = start("std_server", &["127.0.0.1:0"]);
    let get = |target: &[u8]| {
        let mut req = b"GET ".to_vec();
        req.extend_from_slice(target);
        req.extend_from_slice(b" HTTP/1.1\r\nHost: t\r\n\r\n");
        exchange(server.addr, &req)
    };
    let (code, len, body) = get(b"/12");
    assert_eq!((code, len), (200, Some(12)));
    assert_eq!(body, b"unflat unfla");
    // A target that starts with a multi-byte character is no path: 400,
    // where slicing it at byte 1 used to panic the connection's thread.
    assert_eq!(get("\u{e9}t\u{e9}".as_bytes()).0, 400);
    assert_eq!(get(b"*").0, 400);
    assert_eq!(get("/\u{e9}".as_bytes()).0, 404);
    assert_eq!(get(b"/not-a-number").0, 404);
    // The server is still up.
    assert_eq!(get(b"/0").0, 200);
}

#[cfg(feature = "http-body")]
#[test]
fn hyper_rope_serves_both_ropes_whole() {
    let server = start("hyper_rope", &["--addr", "127.0.0.1:0"]);
    let get = |path: &str| {
        let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        exchange(server.addr, req.as_bytes())
    };
    // The same texts the example builds.
    let root = "unflat serves this rope from its own chunks \u{2014} d\u{e9}j\u{e0} vu \u{2713}\n"
        .repeat(500);
    let (code, len, body) = get("/");
    assert_eq!((code, len), (200, Some(root.len())));
    assert_eq!(body, root.as_bytes());

    let mixed = "<p>cr\u{e8}me br\u{fb}l\u{e9}e \u{2014} \u{20ac}\u{1F600}</p>\n";
    let (code, len, body) = get("/mixed");
    assert_eq!((code, len), (200, Some(mixed.len())));
    assert_eq!(body, mixed.as_bytes());

    assert_eq!(get("/nothing").0, 404);
}

#[test]
fn tokio_server_drains_its_queue_with_write_all_buf() {
    let server = start("tokio_server", &["--addr", "127.0.0.1:0"]);
    let get = |target: &str| {
        let req = format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n");
        exchange(server.addr, req.as_bytes())
    };
    let (code, len, body) = get("/12");
    assert_eq!((code, len), (200, Some(12)));
    assert_eq!(body, b"unflat unfla");
    // 200 000 euro signs: 600 000 bytes, streamed in frames of 64 KiB.
    let (code, len, body) = get("/euro/200000");
    assert_eq!((code, len), (200, Some(600_000)));
    assert_eq!(body, "€".repeat(200_000).as_bytes());
    assert_eq!(get("/nope").0, 404);
}
