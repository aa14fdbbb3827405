//! HTTPS: the server behind rustls serves every body form byte for byte,
//! by both strategies, over one keep-alive connection; it closes a client
//! that stalls the handshake, answers one that speaks cleartext HTTP with
//! a plain 400, and goes on serving the others; SIGHUP loads a renewed
//! certificate for new connections; `--tls-provider ring` serves on *ring*.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use crate::common::start_demo;
use crate::common::tls::{client, over, Cert, TlsClient};
use crate::common::{Spawned, SHORT_TIMEOUTS};
use rustls::NamedGroup;
use unflat_server::net::tls::Provider;
use unflat_server::{Config, Strategy};

#[test]
fn every_body_form_arrives_whole_over_https() {
    let cert = Cert::new("bodies");
    for strategy in [Strategy::Direct, Strategy::Flatten] {
        let server = start_demo(cert.config(strategy)).unwrap();
        let mut tls = client(&server, &cert.der);
        let mut buf = Vec::new();
        for len in [4, 1024, 102_400] {
            for kind in ["ascii", "latin1", "twobyte"] {
                for body in ["flat", "rope"] {
                    let request = format!(
                        "GET /end-string/{len}?kind={kind}&body={body} HTTP/1.1\r\nHost: x\r\n\r\n"
                    );
                    tls.write_all(request.as_bytes()).unwrap();
                    let r = crate::common::read_response(&mut tls, &mut buf, false).unwrap();
                    assert_eq!(r.status, 200, "{strategy:?} {request}");
                    assert!(
                        r.body == crate::common::end_string_body(len, kind),
                        "{strategy:?} {request}: {} bytes",
                        r.body.len()
                    );
                }
            }
        }
        // A body sent from the payload's own memory, and a pipelined pair.
        let size = 3 << 20;
        tls.write_all(
            format!("GET /large/{size} HTTP/1.1\r\nHost: x\r\n\r\nGET /end-string/64 HTTP/1.1\r\nHost: x\r\n\r\n")
                .as_bytes(),
        )
        .unwrap();
        let large = crate::common::read_response(&mut tls, &mut buf, false).unwrap();
        assert_eq!(
            crate::common::sha256(&large.body),
            crate::common::sha256(&crate::common::large_body(size)),
            "{strategy:?}"
        );
        let next = crate::common::read_response(&mut tls, &mut buf, false).unwrap();
        assert_eq!(next.body, crate::common::end_string_body(64, "ascii"));
        assert_eq!(tls.conn.alpn_protocol(), Some(&b"http/1.1"[..]));
        // Closing the connection: the server answers with close_notify, which
        // rustls reports as a clean end of stream (no truncation error).
        tls.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let last = crate::common::read_response(&mut tls, &mut buf, false).unwrap();
        assert_eq!(last.status, 200);
        let mut rest = Vec::new();
        tls.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty() && buf.is_empty(), "{strategy:?}");
        server.stop().unwrap();
    }
}

#[test]
fn a_stalled_handshake_is_closed_a_cleartext_client_answered_400_and_others_are_served() {
    let cert = Cert::new("stall");
    let config = Config {
        // The shortest accepted.
        handshake_timeout: Duration::from_secs(1),
        ..cert.config(Strategy::Direct)
    };
    let server = start_demo(config).unwrap();
    // Connected, and not a byte of handshake.
    let mut stalled = crate::common::connect(&server);
    // Cleartext HTTP where TLS is spoken: a 400 in plain HTTP saying so,
    // then the end of the connection.
    let mut plain = crate::common::connect(&server);
    plain
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let refused = crate::common::read_response(&mut plain, &mut Vec::new(), false).unwrap();
    assert_eq!(refused.status, 400);
    assert_eq!(refused.header("connection"), Some("close"));
    assert!(
        String::from_utf8_lossy(&refused.body).contains("https://"),
        "{:?}",
        String::from_utf8_lossy(&refused.body)
    );
    assert!(
        crate::common::closed_within(&mut plain, Duration::from_secs(5)),
        "cleartext client left open"
    );
    assert!(
        crate::common::closed_within(&mut stalled, Duration::from_secs(5)),
        "stalled handshake left open"
    );
    let mut tls = client(&server, &cert.der);
    tls.write_all(b"GET /end-string/4 HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let r = crate::common::read_response(&mut tls, &mut Vec::new(), false).unwrap();
    assert_eq!(r.body, b"aaaa");
}

#[test]
fn a_self_signed_server_names_the_certificate_it_wrote() {
    let server = start_demo(Config {
        tls_self_signed: true,
        ..crate::common::config(Strategy::Direct)
    })
    .unwrap();
    let help = &server.stack().service().help();
    assert!(
        help.contains(&format!("https://{}", server.addr())),
        "{help}"
    );
    let path = help
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                "Self-signed certificate for localhost (removed when the server stops): ",
            )
        })
        .unwrap_or_else(|| panic!("no certificate path in {help}"));
    let path = std::path::PathBuf::from(path);
    // In a directory of its own that only this user can enter, readable by
    // this user alone.
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().unwrap();
    assert_ne!(dir, std::env::temp_dir(), "a directory of its own");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!((mode(dir), mode(&path)), (0o700, 0o600));
    let pem = std::fs::read(&path).unwrap();
    let der = rustls::pki_types::pem::PemObject::from_pem_slice(&pem).unwrap();
    let mut tls = client(&server, &der);
    tls.write_all(b"GET /end-string/64?kind=twobyte HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let r = crate::common::read_response(&mut tls, &mut Vec::new(), false).unwrap();
    assert_eq!(r.body, crate::common::end_string_body(64, "twobyte"));
    drop(tls);
    server.stop().unwrap();
    assert!(
        !path.exists() && !dir.exists(),
        "removed when the server stops"
    );
}

/// The binary's self-signed certificate: named by the banner, in a private
/// directory, and removed when SIGTERM stops the server.
#[test]
fn the_self_signed_certificate_is_removed_when_the_server_stops() {
    use std::io::BufRead;
    let mut child = std::process::Command::new(crate::common::server_binary())
        .args(["--addr", "127.0.0.1:0", "--tls-self-signed"])
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let prefix = "Self-signed certificate for localhost (removed when the server stops): ";
    let mut line = String::new();
    let path = loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "no certificate in the banner"
        );
        if let Some(path) = line.trim_end().strip_prefix(prefix) {
            break std::path::PathBuf::from(path);
        }
    };
    assert!(path.exists());
    let stopped = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let status = child.wait().unwrap();
    assert!(status.success(), "exits 0 on SIGTERM, not {status}");
    assert!(
        !path.exists() && !path.parent().unwrap().exists(),
        "{} left behind",
        path.display()
    );
}

/// Against the server binary: resident memory is measured in a process
/// of its own, not in this one, where other tests run at the same time.
#[test]
fn tls_clients_that_never_read_cost_bounded_memory_and_are_closed() {
    let cert = Cert::new("nonreaders");
    let mut args: Vec<String> = SHORT_TIMEOUTS.iter().map(|a| a.to_string()).collect();
    args.extend(cert.args());
    let server = Spawned::start(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let get = |path: &str| {
        let mut tls = over(server.connect(), &cert.der);
        write!(tls, "GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        crate::common::read_response(&mut tls, &mut Vec::new(), false).unwrap()
    };
    let served = || {
        let r = get("/end-string/3");
        r.status == 200 && r.body == b"aaa"
    };
    assert!(served());
    // Warm-up: the body is cached before memory is measured.
    assert_eq!(get("/end-string/102400").status, 200);
    let before = server.rss();
    let batch = "GET /end-string/102400 HTTP/1.1\r\nHost: t\r\n\r\n".repeat(200);
    let mut hostile: Vec<_> = (0..100)
        .map(|_| {
            let tls = over(server.connect(), &cert.der);
            tls.sock
                .set_write_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            tls
        })
        .collect();
    for tls in &mut hostile {
        // The handshake, then as much of the batch as the server reads
        // before it stops reading (backpressure).
        let _ = tls.write_all(batch.as_bytes());
    }
    // rustls holds up to `tls::RECORDS_HELD` (256 KiB) of records per
    // connection beyond what cleartext holds, within the same bound.
    let mut sockets: Vec<TcpStream> = hostile
        .iter()
        .map(|t| t.sock.try_clone().unwrap())
        .collect();
    crate::common::non_readers_bounded_and_closed(
        "TLS clients",
        &server,
        before,
        served,
        &mut sockets,
    );
}

#[test]
fn graceful_shutdown_ends_an_idle_connection_with_close_notify() {
    let cert = Cert::new("shutdown");
    let server = start_demo(cert.config(Strategy::Direct)).unwrap();
    let mut tls = client(&server, &cert.der);
    tls.write_all(b"GET /end-string/4 HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    let r = crate::common::read_response(&mut tls, &mut buf, false).unwrap();
    assert_eq!(r.body, b"aaaa");
    server.stop().unwrap();
    // rustls reports a close without close_notify as an UnexpectedEof error.
    let mut rest = Vec::new();
    tls.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty() && buf.is_empty());
}

/// An HTTPS exchange on a new connection to `addr`, trusting only `der`:
/// the response's status, or the error (a certificate not trusted).
fn status_over_https(
    addr: &str,
    der: &rustls::pki_types::CertificateDer<'static>,
) -> Result<u16, String> {
    let mut tls = crate::common::tls::over(TcpStream::connect(addr).unwrap(), der);
    tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .map_err(|e| e.to_string())?;
    crate::common::read_response(&mut tls, &mut Vec::new(), false)
        .map(|r| r.status)
        .map_err(|e| e.to_string())
}

/// `/metrics` over HTTPS, trusting `der`.
fn metrics_over_https(addr: &str, der: &rustls::pki_types::CertificateDer<'static>) -> String {
    let mut tls = crate::common::tls::over(TcpStream::connect(addr).unwrap(), der);
    tls.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let r = crate::common::read_response(&mut tls, &mut Vec::new(), false).unwrap();
    String::from_utf8(r.body).unwrap()
}

/// The expiry metric's line for a certificate expiring at `unix`.
fn expiry(unix: i64) -> String {
    format!("unflat_tls_certificate_expiry_timestamp_seconds {unix}\n")
}

#[test]
fn sighup_loads_the_certificate_again_for_new_connections_and_keeps_the_open_ones() {
    // 2030-01-01 and 2031-01-01, in Unix seconds.
    let (old_expiry, new_expiry) = (1_893_456_000, 1_924_992_000);
    let old = Cert::expiring("reload-old", 2030);
    let new = Cert::expiring("reload-new", 2031);
    let args = old.args();
    let (mut child, addr) =
        crate::common::spawn_server(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(status_over_https(&addr, &old.der), Ok(200));
    assert!(metrics_over_https(&addr, &old.der).contains(&expiry(old_expiry)));
    // A connection open across the reload keeps its session.
    let mut open = crate::common::tls::over(TcpStream::connect(&addr).unwrap(), &old.der);
    open.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    assert_eq!(
        crate::common::read_response(&mut open, &mut Vec::new(), false)
            .unwrap()
            .status,
        200
    );
    old.replace_with(&new);
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: a signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
    // The reload is done when a new connection is offered the new certificate.
    let begun = std::time::Instant::now();
    while status_over_https(&addr, &new.der).is_err() {
        assert!(
            begun.elapsed() < Duration::from_secs(10),
            "still the old certificate"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        status_over_https(&addr, &old.der).is_err(),
        "the old certificate still offered"
    );
    let metrics = metrics_over_https(&addr, &new.der);
    assert!(metrics.contains(&expiry(new_expiry)), "{metrics}");
    assert!(metrics.contains("unflat_tls_reloads_total{result=\"loaded\"} 1"));
    open.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    assert_eq!(
        crate::common::read_response(&mut open, &mut Vec::new(), false)
            .unwrap()
            .status,
        200
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "SIGHUP ended the server"
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// A server process, killed when dropped: also when an assertion fails.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The server's stderr, line by line, and the lines read so far.
struct Log {
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Log {
    /// Reads `child`'s piped stderr on a thread of its own.
    fn of(child: &mut std::process::Child) -> Log {
        use std::io::BufRead;
        let stderr = child.stderr.take().expect("stderr piped");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Log {
            lines,
            seen: Vec::new(),
        }
    }

    /// The first line from now on that contains `what`, within 10 s.
    fn wait_for(&mut self, what: &str) -> String {
        let begun = std::time::Instant::now();
        loop {
            let left = Duration::from_secs(10).saturating_sub(begun.elapsed());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no {what:?} in the log: {:?}", self.seen));
            self.seen.push(line.clone());
            if line.contains(what) {
                return line;
            }
        }
    }
}

/// A renewed chain longer than OpenSSL's clients take (its Certificate
/// message over 102 400 bytes) is refused at SIGHUP with one error naming
/// the limit and its size, and the certificate in use is kept; the longest
/// chain they take is loaded.
#[test]
fn sighup_refuses_a_chain_longer_than_openssl_clients_take_and_keeps_the_certificate() {
    use crate::common::tls::{certificate_message, most_copies_taken};
    let (old, long, longest) = (
        Cert::new("chain-old"),
        Cert::new("chain-long"),
        Cert::new("chain-longest"),
    );
    let copies = most_copies_taken(long.der.len()) + 1;
    long.repeat(copies);
    longest.repeat(most_copies_taken(longest.der.len()));
    let mut child = Killed(
        std::process::Command::new(crate::common::server_binary())
            .args(["--addr", "127.0.0.1:0"])
            .args(old.args())
            .env("RUST_LOG", "info")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let addr = crate::common::banner_address(&mut child.0).expect("no banner");
    let mut log = Log::of(&mut child.0);
    let pid = libc::pid_t::try_from(child.0.id()).unwrap();
    let hangup = || {
        // SAFETY: a signal to our own child process.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
    };
    assert_eq!(status_over_https(&addr, &old.der), Ok(200));

    old.replace_with(&long);
    hangup();
    let refused = log.wait_for("reload failed");
    let size = certificate_message(long.der.len(), copies);
    assert!(refused.contains(" ERROR "), "{refused}");
    assert!(
        refused.contains(&format!(
            "a chain of {copies} certificates makes a Certificate message of {size} bytes, over the 102400"
        )),
        "{refused}"
    );
    assert_eq!(
        status_over_https(&addr, &old.der),
        Ok(200),
        "old certificate"
    );

    old.replace_with(&longest);
    hangup();
    log.wait_for("reload: certificate and key loaded");
    assert!(
        child.0.try_wait().unwrap().is_none(),
        "SIGHUP ended the server"
    );
    drop(child);
    let errors = log.seen.iter().filter(|l| l.contains(" ERROR ")).count();
    assert_eq!(errors, 1, "{:?}", log.seen);
}

/// A client that trusts only `der` and offers X25519MLKEM768 first, with
/// its key share, and X25519 after it: aws-lc-rs takes the first, *ring*,
/// which has no ML-KEM, asks for X25519 again (a HelloRetryRequest). The
/// group a server agrees on tells which provider it runs.
fn provider_probe(addr: &str, der: &rustls::pki_types::CertificateDer<'static>) -> TlsClient {
    use rustls::crypto::aws_lc_rs::{default_provider, kx_group};
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der.clone()).unwrap();
    let provider = rustls::crypto::CryptoProvider {
        kx_groups: vec![kx_group::X25519MLKEM768, kx_group::X25519],
        ..default_provider()
    };
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    TlsClient {
        conn: rustls::ClientConnection::new(Arc::new(config), name).unwrap(),
        sock: TcpStream::connect(addr).unwrap(),
    }
}

#[test]
fn tls_provider_ring_serves_https_on_ring_and_the_banner_names_it() {
    let cert = Cert::new("provider");
    for (provider, group) in [
        ("ring", NamedGroup::X25519),
        ("aws-lc-rs", NamedGroup::X25519MLKEM768),
    ] {
        let mut args = cert.args();
        args.extend(["--tls-provider".into(), provider.into()]);
        let (mut child, addr) =
            crate::common::spawn_server(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let mut tls = provider_probe(&addr, &cert.der);
        tls.write_all(b"GET /end-string/102400?kind=twobyte HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .unwrap();
        let r = crate::common::read_response(&mut tls, &mut Vec::new(), false);
        let _ = child.kill();
        let _ = child.wait();
        let r = r.unwrap_or_else(|e| panic!("--tls-provider {provider}: {e}"));
        assert_eq!(r.status, 200, "--tls-provider {provider}");
        assert!(
            r.body == crate::common::end_string_body(102_400, "twobyte"),
            "--tls-provider {provider}: {} bytes",
            r.body.len()
        );
        let agreed = tls.conn.negotiated_key_exchange_group().map(|g| g.name());
        assert_eq!(agreed, Some(group), "--tls-provider {provider}");
    }
    // The banner (and `GET /`) says which provider serves.
    let server = start_demo(Config {
        tls_provider: Provider::Ring,
        ..cert.config(Strategy::Direct)
    })
    .unwrap();
    let help = server.stack().service().help();
    let first = help.lines().next().unwrap_or_default();
    assert_eq!(
        first,
        format!(
            "unflat-server (direct strategy, rustls with ring) at https://{}",
            server.addr()
        )
    );
}
