//! RFC 9112 / RFC 9110 conformance over raw sockets. Each case sends bytes
//! on a new connection and checks the status of the first response, whether
//! the server then closes the connection, and (where given) a follow-up
//! request pipelined behind it. The RFC section of each case is in the
//! table; docs/robustness.md lists them. The table runs over cleartext and
//! over TLS alike.

use std::io::{Read, Write};

use crate::common::start_demo;
use crate::common::tls::{client, Cert, Duplex};
use crate::common::{connect, read_response, start};
use unflat_server::Strategy;

/// What a case expects.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// This status, then the connection stays open: a pipelined
    /// `GET /end-string/2` behind the request is answered `aa`.
    Open(u16),
    /// This status, then the server closes the connection.
    Close(u16),
    /// No response at all; the server closes the connection.
    Silent,
}

use Expect::{Close, Open, Silent};

const NEXT: &str = "GET /end-string/2 HTTP/1.1\r\nHost: t\r\n\r\n";

fn chunked_echo(body: &str) -> String {
    format!("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n{body}")
}

fn chunked_echo_raw(body: &str) -> String {
    format!("PUT /echo?format=raw HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n{body}")
}

fn cases() -> Vec<(&'static str, &'static str, String, Expect)> {
    let big_line = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(9000));
    let big_head = format!(
        "GET / HTTP/1.1\r\nHost: t\r\n{}\r\n",
        "X-Pad: 0123456789012345678901234567890123456789\r\n".repeat(400)
    );
    let many_fields = format!(
        "GET / HTTP/1.1\r\nHost: t\r\n{}\r\n",
        (0..100)
            .map(|i| format!("X-{i}: v\r\n"))
            .collect::<String>()
    );
    let hundred_fields = format!(
        "GET / HTTP/1.1\r\nHost: t\r\n{}\r\n",
        (0..99).map(|i| format!("X-{i}: v\r\n")).collect::<String>()
    );
    let s = |x: &str| x.to_string();
    vec![
        // Message framing, RFC 9112 §6.
        ("CL and TE together", "§6.1, §6.3", s("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), Close(400)),
        ("TE then CL", "§6.1, §6.3", s("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"), Close(400)),
        ("TE gzip, chunked (unknown coding)", "§6.1", s("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"), Close(501)),
        ("TE chunked, gzip (chunked not last)", "§6.3 item 4", s("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n"), Close(400)),
        ("TE gzip alone", "§6.3 item 4", s("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n"), Close(400)),
        ("TE identity", "§6.3 item 4", s("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: identity\r\n\r\n"), Close(400)),
        ("TE chunked twice", "§6.1", s("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n"), Close(400)),
        ("TE split over two lines, gzip then chunked", "§6.1, RFC 9110 §5.3", s("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), Close(501)),
        ("TE in HTTP/1.0", "§6.1", s("POST /echo HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), Close(400)),
        ("TE chunked in upper case", "§7 (coding names are case-insensitive)", s("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: CHUNKED\r\n\r\n3\r\nabc\r\n0\r\n\r\n"), Open(200)),
        ("TE chunked with trailing whitespace", "RFC 9110 §5.5 (OWS)", s("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked  \r\n\r\n0\r\n\r\n"), Open(200)),
        ("CL negative", "§6.3 item 5, RFC 9110 §8.6", s("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: -1\r\n\r\n"), Close(400)),
        ("CL signed", "RFC 9110 §8.6", s("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: +5\r\n\r\nhello"), Close(400)),
        ("CL hexadecimal", "RFC 9110 §8.6", s("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 0x5\r\n\r\nhello"), Close(400)),
        ("CL with exponent", "RFC 9110 §8.6", s("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5e0\r\n\r\nhello"), Close(400)),
        ("CL overflowing u64", "§6.3 item 5", s("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 99999999999999999999999\r\n\r\n"), Close(400)),
        ("CL empty", "RFC 9110 §8.6", s("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length:\r\n\r\n"), Close(400)),
        ("CL conflicting lines", "§6.3 item 5", s("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"), Close(400)),
        ("CL conflicting list", "§6.3 item 5", s("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5, 6\r\n\r\nhello!"), Close(400)),
        ("CL identical lines", "§6.3 item 5 (MAY accept)", s("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello"), Open(200)),
        ("CL identical list", "§6.3 item 5 (MAY accept)", s("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5, 5\r\n\r\nhello"), Open(200)),
        ("CL with surrounding whitespace", "RFC 9110 §5.5", s("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length:   5  \r\n\r\nhello"), Open(200)),
        ("CL body on GET is read and skipped", "§6.3 item 6", s("GET /end-string/1 HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nbody"), Open(200)),
        ("chunked body on GET is read and skipped", "§7.1", s("GET /end-string/1 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\n\r\n"), Open(200)),
        // Host, RFC 9112 §3.2 and RFC 9110 §7.2.
        ("HTTP/1.1 without Host", "§3.2", s("GET / HTTP/1.1\r\n\r\n"), Close(400)),
        ("two Host lines", "§3.2", s("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), Close(400)),
        ("Host with a space", "RFC 9110 §7.2, RFC 3986 §3.2.2", s("GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), Close(400)),
        ("Host with a slash", "RFC 9110 §7.2", s("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"), Close(400)),
        ("Host with userinfo", "RFC 9110 §7.2 (no userinfo)", s("GET / HTTP/1.1\r\nHost: user@a\r\n\r\n"), Close(400)),
        ("Host with a bad port", "RFC 3986 §3.2.3", s("GET / HTTP/1.1\r\nHost: a:http\r\n\r\n"), Close(400)),
        ("Host IPv6 literal with port", "RFC 3986 §3.2.2", s("GET /end-string/1 HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n"), Open(200)),
        ("Host empty", "§3.2 (empty when no authority)", s("GET /end-string/1 HTTP/1.1\r\nHost:\r\n\r\n"), Open(200)),
        ("HTTP/1.0 without Host", "§3.2 (required in 1.1 only)", s("GET /end-string/1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"), Open(200)),
        // Field syntax, RFC 9112 §5.
        ("whitespace between name and colon", "§5.1", s("GET / HTTP/1.1\r\nHost : t\r\n\r\n"), Close(400)),
        ("obs-fold", "§5.2", s("GET / HTTP/1.1\r\nHost: t\r\nX-A: one\r\n two\r\n\r\n"), Close(400)),
        ("bare CR in a value", "§2.2, RFC 9110 §5.5", s("GET / HTTP/1.1\r\nHost: t\r\nX-A: a\rb\r\n\r\n"), Close(400)),
        ("NUL in a value", "RFC 9110 §5.5", s("GET / HTTP/1.1\r\nHost: t\r\nX-A: a\0b\r\n\r\n"), Close(400)),
        ("control byte 0x01 in a value", "RFC 9110 §5.5", s("GET / HTTP/1.1\r\nHost: t\r\nX-A: a\x01b\r\n\r\n"), Close(400)),
        ("DEL in a value", "RFC 9110 §5.5", s("GET / HTTP/1.1\r\nHost: t\r\nX-A: a\x7fb\r\n\r\n"), Close(400)),
        ("non-token character in a name", "RFC 9110 §5.1", s("GET / HTTP/1.1\r\nHost: t\r\nX@A: v\r\n\r\n"), Close(400)),
        ("empty field name", "RFC 9110 §5.1", s("GET / HTTP/1.1\r\nHost: t\r\n: v\r\n\r\n"), Close(400)),
        ("bare LF line endings (accepted)", "§2.2 (MAY accept)", s("GET /end-string/1 HTTP/1.1\nHost: t\n\n"), Open(200)),
        ("leading empty line before the request line", "§2.2 (SHOULD ignore)", s("\r\nGET /end-string/1 HTTP/1.1\r\nHost: t\r\n\r\n"), Open(200)),
        ("obs-text in a value (accepted)", "RFC 9110 §5.5", s("GET /end-string/1 HTTP/1.1\r\nHost: t\r\nX-A: caf\u{e9}\r\n\r\n"), Open(200)),
        // Request line and limits, RFC 9112 §3 and RFC 9110 §15.
        ("request line over 8 KiB", "§3, RFC 9110 §15.5.15", big_line, Close(414)),
        ("head over 16 KiB", "RFC 6585 §5", big_head, Close(431)),
        ("101 fields", "RFC 6585 §5", many_fields, Close(431)),
        ("100 fields (accepted)", "RFC 6585 §5", hundred_fields, Open(200)),
        ("lower-case method is another method", "RFC 9110 §9.1 (case-sensitive)", s("get /end-string/1 HTTP/1.1\r\nHost: t\r\n\r\n"), Open(405)),
        ("invalid method characters", "§3.1, RFC 9110 §9.1", s("G(T / HTTP/1.1\r\nHost: t\r\n\r\n"), Close(400)),
        ("HTTP/2.0 on an HTTP/1.1 connection", "§2.3, RFC 9110 §15.6.6", s("GET / HTTP/2.0\r\nHost: t\r\n\r\n"), Close(505)),
        ("malformed version", "§2.3", s("GET / HTTP/1.1x\r\nHost: t\r\n\r\n"), Close(400)),
        ("missing version", "§3", s("GET /\r\nHost: t\r\n\r\n"), Close(400)),
        ("two spaces in the request line", "§3", s("GET  / HTTP/1.1\r\nHost: t\r\n\r\n"), Close(400)),
        ("UTF-8 where a scheme would end in the target", "§3.2 (neither origin- nor absolute-form)", s("GET https\u{72b}x HTTP/1.1\r\nHost: t\r\n\r\n"), Close(400)),
        ("a space inside the target", "§3", s("GET /a b HTTP/1.1\r\nHost: t\r\n\r\n"), Close(400)),
        ("a space inside the target of a HEAD", "§3, RFC 9110 §9.3.2", s("HEAD /a b HTTP/1.1\r\nHost: t\r\n\r\n"), Close(400)),
        ("absolute-form target", "§3.2.2", s("GET http://example.com/end-string/1 HTTP/1.1\r\nHost: example.com\r\n\r\n"), Open(200)),
        ("unknown path", "RFC 9110 §15.5.5", s("GET /nope HTTP/1.1\r\nHost: t\r\n\r\n"), Open(404)),
        ("wrong method on a known path", "RFC 9110 §15.5.6", s("DELETE /end-string/1 HTTP/1.1\r\nHost: t\r\n\r\n"), Open(405)),
        // Chunked transfer coding, RFC 9112 §7.1.
        ("chunk extensions", "§7.1.1", chunked_echo("3;name=value;x\r\nabc\r\n0\r\n\r\n"), Open(200)),
        ("trailer section", "§7.1.2", chunked_echo("3\r\nabc\r\n0\r\nX-Trailer: 1\r\nX-Other: 2\r\n\r\n"), Open(200)),
        ("chunk size overflowing", "§7.1", chunked_echo("fffffffffffffffffffff\r\nabc\r\n0\r\n\r\n"), Close(400)),
        ("chunk size not hex", "§7.1", chunked_echo("xyz\r\nabc\r\n0\r\n\r\n"), Close(400)),
        ("chunk data without its CRLF", "§7.1", chunked_echo("3\r\nabcd\r\n0\r\n\r\n"), Close(400)),
        ("truncated chunk, then the client closes", "§8", chunked_echo("10\r\nabc"), Silent),
        ("chunked body over the /echo limit", "RFC 9110 §15.5.14", chunked_echo(&format!("100001\r\n{}\r\n0\r\n\r\n", "a".repeat(0x100001))), Close(413)),
        ("Content-Length over the /echo limit", "RFC 9110 §15.5.14", s("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2000000\r\n\r\n"), Close(413)),
        // Expect, RFC 9110 §10.1.1.
        ("HEAD with a body over the /echo limit: no content", "RFC 9110 §9.3.2, §15.5.14", s("HEAD /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 999999999999\r\n\r\n"), Close(413)),
        ("HEAD with a malformed chunked body: no content", "RFC 9110 §9.3.2, §7.1", s("HEAD /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), Close(400)),
        ("raw echo of a chunked body", "§7.1", chunked_echo_raw("3\r\nabc\r\n0\r\n\r\n"), Open(200)),
        ("unknown expectation", "RFC 9110 §10.1.1", s("POST /echo HTTP/1.1\r\nHost: t\r\nExpect: teapot\r\nContent-Length: 1\r\n\r\nx"), Close(417)),
        ("Expect ignored in HTTP/1.0", "RFC 9110 §10.1.1", s("POST /echo HTTP/1.0\r\nConnection: keep-alive\r\nExpect: teapot\r\nContent-Length: 1\r\n\r\nx"), Open(200)),
        // A head already refused is answered at once, without 100 Continue,
        // and the body it never asked for is not awaited: the request
        // carries no body here, so a server that sent 100 fails the status.
        ("Expect on a path with no route: 404 at once", "RFC 9110 §10.1.1", s("POST /nope HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"), Close(404)),
        ("Expect with a method the path does not take: 405 at once", "RFC 9110 §10.1.1", s("POST /healthz HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"), Close(405)),
        ("Expect with a query the route refuses: 400 at once", "RFC 9110 §10.1.1", s("POST /echo?format=bad HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"), Close(400)),
        ("Expect on POST /large/1TiB: 405 at once", "RFC 9110 §10.1.1", s("POST /large/1TiB HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"), Close(405)),
        ("Expect on GET /large/1TiB with a body: 400 at once", "RFC 9110 §10.1.1", s("GET /large/1TiB HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n"), Close(400)),
        ("Expect with a Content-Length over the /echo limit: 413 at once", "RFC 9110 §10.1.1, §15.5.14", s("POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 2000000\r\n\r\n"), Close(413)),
        ("no Expect, no route: the body is read, 404, connection kept", "RFC 9110 §15.5.5", s("POST /nope HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello"), Open(404)),
        // Connection, RFC 9112 §9.
        ("Connection: close", "§9.6", s("GET /end-string/1 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"), Close(200)),
        ("Connection: close among other tokens", "§9.6, RFC 9110 §7.6.1", s("GET /end-string/1 HTTP/1.1\r\nHost: t\r\nConnection: Keep-Alive, CLOSE\r\n\r\n"), Close(200)),
        ("HTTP/1.0 closes by default", "§9.3", s("GET /end-string/1 HTTP/1.0\r\n\r\n"), Close(200)),
        ("HTTP/1.0 keep-alive when asked", "§9.3, RFC 7230 §A.1.2", s("GET /end-string/1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"), Open(200)),
    ]
}

/// Runs one case on a connection from `open`; returns what went wrong, if
/// anything.
fn run(
    open: &dyn Fn() -> Box<dyn Duplex>,
    name: &str,
    request: &str,
    expect: Expect,
) -> Result<(), String> {
    let mut s = open();
    let mut bytes = request.as_bytes().to_vec();
    if let Open(_) = expect {
        bytes.extend_from_slice(NEXT.as_bytes());
    }
    // The server may answer and close before reading everything (413, 431):
    // a failed write is then expected, not an error.
    let _ = s.write_all(&bytes);
    if let Silent = expect {
        let _ = s.shutdown_write();
    }
    let mut buf = Vec::new();
    let head_request = request.starts_with("HEAD ");
    match expect {
        Silent => {
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
            if !rest.is_empty() {
                return Err(format!(
                    "{name}: expected no response, got {:?}",
                    String::from_utf8_lossy(&rest)
                ));
            }
        }
        Open(status) | Close(status) => {
            let r = read_response(&mut s, &mut buf, head_request)
                .map_err(|e| format!("{name}: {e}"))?;
            if r.status != status {
                let body = String::from_utf8_lossy(&r.body);
                return Err(format!(
                    "{name}: status {} (expected {status}): {:.200}",
                    r.status, body
                ));
            }
            if status >= 400 && r.body.is_empty() && !head_request {
                return Err(format!("{name}: a rejection without a reason"));
            }
            match expect {
                Close(_) => {
                    // For a HEAD, any body bytes sent would be read here and
                    // fail the case: a response to HEAD has no content.
                    if r.header("connection") != Some("close") {
                        return Err(format!("{name}: no Connection: close"));
                    }
                    let mut rest = Vec::new();
                    match s.read_to_end(&mut rest) {
                        Ok(_) if buf.is_empty() && rest.is_empty() => {}
                        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
                        other => {
                            return Err(format!(
                                "{name}: not closed after the response: {other:?} {:?}",
                                String::from_utf8_lossy(&rest)
                            ))
                        }
                    }
                }
                _ => {
                    let next = read_response(&mut s, &mut buf, false)
                        .map_err(|e| format!("{name}: pipelined request: {e}"))?;
                    if next.body != b"aa" {
                        return Err(format!(
                            "{name}: pipelined request answered {:?}",
                            String::from_utf8_lossy(&next.body)
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Runs every case on connections from `open`, and fails with the list of
/// those that went wrong.
fn all_cases(open: &dyn Fn() -> Box<dyn Duplex>) {
    let cases = cases();
    assert!(cases.len() >= 60, "{} cases", cases.len());
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(name, _rfc, request, expect)| run(open, name, request, *expect).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn rfc9112_conformance() {
    let server = start(Strategy::Direct);
    all_cases(&|| Box::new(connect(&server)));
}

/// The same table through TLS: the server sees the same bytes once
/// decrypted, and every close is a TLS close (`close_notify`; rustls
/// reports a close without one as an error, which fails the case).
#[test]
fn rfc9112_conformance_over_tls() {
    let cert = Cert::new("conformance");
    let server = start_demo(cert.config(Strategy::Direct)).unwrap();
    all_cases(&|| Box::new(client(&server, &cert.der)));
}

#[test]
fn expect_100_continue_gets_an_interim_response_first() {
    let server = start(Strategy::Direct);
    let mut s = connect(&server);
    s.write_all(
        b"POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n",
    )
    .unwrap();
    let mut buf = Vec::new();
    let interim = read_response(&mut s, &mut buf, false).unwrap();
    assert_eq!(interim.status, 100);
    s.write_all(b"hello").unwrap();
    let r = read_response(&mut s, &mut buf, false).unwrap();
    assert_eq!(r.status, 200);
}

/// `Expect: 100-continue` on a head already refused — its route, method,
/// query or declared length — is answered with the final status first:
/// no `100 Continue`, so the client uploads nothing, and `Connection:
/// close`, since the body it holds back is never read.
#[test]
fn expect_100_continue_is_not_sent_for_a_head_already_refused() {
    let server = start(Strategy::Direct);
    for (request, status) in [
        ("POST /healthz", 405),
        ("POST /nope", 404),
        ("POST /echo?format=bad", 400),
        ("POST /large/1TiB", 405),
        ("PUT /echo", 413),
    ] {
        // 2 000 000 bytes: over the default --max-body (1 MiB).
        let length = if status == 413 { 2_000_000 } else { 5 };
        let mut s = connect(&server);
        s.write_all(
            format!(
                "{request} HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: {length}\r\n\r\n"
            )
            .as_bytes(),
        )
        .unwrap();
        let mut buf = Vec::new();
        let r = read_response(&mut s, &mut buf, false).unwrap();
        let first = String::from_utf8_lossy(&r.head[..12]).into_owned();
        assert_eq!(first, format!("HTTP/1.1 {status}"), "{request}");
        assert_eq!(r.header("connection"), Some("close"), "{request}");
        assert!(
            crate::common::closed(&mut s, &mut buf),
            "{request}: not closed"
        );
    }
}

#[test]
fn head_has_the_headers_of_get() {
    let server = start(Strategy::Direct);
    for path in ["/", "/end-string/100?kind=latin1", "/large/5000", "/nope"] {
        let get = crate::common::exchange(
            &server,
            format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes(),
        );
        let head = crate::common::exchange(
            &server,
            format!("HEAD {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes(),
        );
        assert_eq!(get.status, head.status);
        assert!(head.body.is_empty());
        let strip = |r: &crate::common::Raw| {
            r.headers
                .iter()
                .filter(|(n, _)| n != "Date")
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(strip(&get), strip(&head), "{path}");
    }
}
