//! A response the shutdown cuts — its grace over, or a second signal — is
//! cut as every other cut is: a body delimited by the close ends with a
//! reset, never a clean FIN a client would take for its end; a chunked
//! body has no last chunk. Over TCP and TLS.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::Child;
use std::time::{Duration, Instant};

use crate::common::spawn_server;
use crate::common::tls::{over, Cert, Duplex};

/// Sends `signal` to `child`.
fn signal(child: &Child, signal: libc::c_int) {
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: a signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
}

/// How a client saw the end of a response body.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// A clean close (FIN) after these bytes.
    Fin(Vec<u8>),
    /// A reset after these bytes.
    Reset(Vec<u8>),
}

/// Reads `s` to its end, within `within`.
fn read_to_end(s: &mut dyn Read, within: Duration) -> End {
    let until = Instant::now() + within;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        assert!(Instant::now() < until, "no end within {within:?}");
        match s.read(&mut buf) {
            Ok(0) => return End::Fin(got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return End::Reset(got),
            // rustls reports a TCP reset under a record as an I/O error of
            // its own kind, or a close without close_notify as EOF.
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => return End::Fin(got),
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => {}
            Err(e) => panic!("{e}"),
        }
    }
}

/// A paced stream (a chunk every 50 ms, for a minute) asked over HTTP/1.0
/// and HTTP/1.1, cleartext and TLS, then the server stopped: by its grace
/// ending (`--grace 1s`), or by a second SIGTERM. The HTTP/1.0 body, which
/// only the close ends, ends with a reset; the chunked one has no last
/// chunk and is reset too.
#[test]
fn a_response_cut_at_shutdown_ends_with_a_reset() {
    let cert = Cert::new("shutdown-cut");
    for tls in [false, true] {
        for second_signal in [false, true] {
            let mut args = vec!["--workers".to_string(), "1".into(), "--grace".into()];
            args.push(if second_signal { "60s" } else { "1s" }.into());
            if tls {
                args.extend(cert.args());
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let (mut child, addr) = spawn_server(&args);
            let mut clients: Vec<(&str, Box<dyn Duplex>)> = Vec::new();
            for version in ["1.0", "1.1"] {
                let tcp = TcpStream::connect(&addr).unwrap();
                tcp.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
                let mut s: Box<dyn Duplex> = if tls {
                    Box::new(over(tcp, &cert.der))
                } else {
                    Box::new(tcp)
                };
                let request = format!(
                    "GET /end-string/1000?chunks=1000&every=50 HTTP/{version}\r\nHost: t\r\n\r\n"
                );
                s.write_all(request.as_bytes()).unwrap();
                let mut first = [0u8; 64];
                let n = s.read(&mut first).unwrap();
                assert!(first[..n].starts_with(b"HTTP/1.1 200"), "{version}");
                clients.push((version, s));
            }
            signal(&child, libc::SIGTERM);
            if second_signal {
                std::thread::sleep(Duration::from_millis(300));
                signal(&child, libc::SIGTERM);
            }
            for (version, mut s) in clients {
                let case = format!("HTTP/{version}, tls {tls}, second signal {second_signal}");
                match read_to_end(&mut *s, Duration::from_secs(20)) {
                    End::Reset(got) => {
                        assert!(!got.ends_with(b"0\r\n\r\n"), "{case}: a last chunk");
                    }
                    End::Fin(got) => panic!(
                        "{case}: a clean close after {} bytes: {:?}",
                        got.len(),
                        String::from_utf8_lossy(&got[got.len().saturating_sub(40)..])
                    ),
                }
            }
            let status = child.wait().unwrap();
            assert!(status.success() || second_signal, "{status}");
        }
    }
}

/// How one connection of the load below ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// Refused at connect: the listener was closed.
    Refused,
    /// Answered (any status).
    Answered,
    /// Accepted, asked, and closed or reset without a byte of an answer.
    Dropped,
}

/// One connection: connect, ask, read the answer.
fn one(addr: &str) -> Outcome {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return Outcome::Refused;
    };
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    if s.write_all(b"GET /end-string/3 HTTP/1.1\r\nHost: t\r\n\r\n")
        .is_err()
    {
        return Outcome::Dropped;
    }
    match crate::common::read_response(&mut s, &mut Vec::new(), false) {
        Ok(_) => Outcome::Answered,
        Err(_) => Outcome::Dropped,
    }
}

/// Eight clients opening a connection per request in a loop through the
/// whole shutdown (`--shutdown-delay 2s --grace 5s`, SIGTERM): every
/// connection is answered, or refused at connect once the listener is
/// closed — none accepted and then closed or reset without an answer
/// (after the delay 2–3 were closed and 2–4 reset, unanswered).
#[test]
fn a_shutdown_delay_leaves_no_accepted_connection_unanswered() {
    let (mut child, addr) =
        spawn_server(&["--workers", "2", "--shutdown-delay", "2s", "--grace", "5s"]);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load: Vec<_> = (0..8)
        .map(|_| {
            let (addr, done) = (addr.clone(), done.clone());
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let outcome = one(&addr);
                    seen.push(outcome);
                    if outcome == Outcome::Refused {
                        // Refused once: the server stops; a few more tries.
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
                seen
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    signal(&child, libc::SIGTERM);
    let status = child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen: Vec<Outcome> = load.into_iter().flat_map(|t| t.join().unwrap()).collect();
    let count = |o| seen.iter().filter(|&&s| s == o).count();
    eprintln!(
        "answered {}, refused {}, dropped {}",
        count(Outcome::Answered),
        count(Outcome::Refused),
        count(Outcome::Dropped)
    );
    assert!(status.success(), "{status}");
    assert!(count(Outcome::Answered) > 100);
    assert!(
        count(Outcome::Refused) > 0,
        "the load ran past the listener's close"
    );
    assert_eq!(count(Outcome::Dropped), 0);
}
