//! Request framing, vector by vector: what a request's bytes mean (where
//! its head and body end, and whether it is one request or hides another)
//! checked against RFC 9112 over raw sockets on the demo server and,
//! split into reads anywhere, through the sans-IO [`Session`] on the
//! trivial service of `common/trivial.rs` (the core alone).
//!
//! # Sources
//!
//! Most vectors come from llhttp's request corpus (`test/request/*.md` at
//! commit `01e105a30fd06e248bc8ac73c4adb34a63d4114a`, v9.4.2), whose bytes
//! were extracted mechanically with the corpus's own transformation; the
//! rest cover what that corpus has no vector for (NUL bytes, chunk-size
//! overflow, BWS in chunk extensions, malformed trailers, the extension and
//! trailer limits, asterisk-form, HTTP/1.2, Host rules…). Every entry names
//! its source — `llhttp test/request/<file>.md "<section>"` and/or the
//! RFC 9112 (or RFC 9110) section — and records llhttp's outcome in its
//! default mode (no lenient flags: its strictest), e.g.
//! `HPE_INVALID_CHUNK_SIZE` or `accepted`, so the two can be compared;
//! `accepted (request-lenient-…)` marks a corpus test run only with a
//! lenient flag, and `not in corpus` a vector of our own (with, where
//! known, what llhttp's source would do).
//!
//! Porting: llhttp checks no Host, so `Host: x` is added to HTTP/1.1
//! requests (one vector keeps a corpus request without it, for the Host
//! rule); a body whose decoding is the point is sent to
//! `/echo?format=raw`, which answers it decoded; a `#fragment` is dropped
//! from targets that do not test it (it is a 400 here); input the corpus
//! stops short (a last chunk without its final CRLF, a head without its
//! empty line) is completed; tunnel or upgrade bytes behind a request and
//! HTTP/1.0 non-persistence are removed (`Connection: keep-alive`) unless
//! they are the point.
//!
//! # Verdicts
//!
//! Each vector is sent on a new connection, followed by a pipelined
//! `GET /end-string/2`, and expects one of:
//!
//! - [`Served`]`{ status, body }`: the server answers with `status` (and,
//!   for the raw echo, exactly the decoded `body`), keeps the connection,
//!   and answers the pipelined request `aa`;
//! - [`Refused`]`(status)`: the server answers with `status` and
//!   `Connection: close`, then closes the connection and answers nothing
//!   else — no hidden request, no pipelined one. A few vectors expect
//!   `Refused` with a status below 400: a request that is served but ends
//!   the connection (`Connection: close`, HTTP/1.0 without keep-alive),
//!   after which nothing may be processed either (RFC 9112 §9.3, §9.6).
//!
//! In memory, on the trivial service, the pipelined request is `GET /n/2`
//! (answered `ab`), and a served vector's status is not checked, as it
//! comes from the demo's routes; the rest of the verdict is the core's.
//!
//! The verdicts are RFC 9112's (and RFC 9110's), read strictly: where the
//! RFC leaves a choice (a bare LF ending a head line, identical
//! Content-Length values, closing the connection after refusing a
//! `CONNECT`) the entry expects what this server chose, and its source
//! says which choice the RFC allows.
//!
//! `vector_table_markdown` writes the table as markdown to the path in
//! `FRAMING_TABLE` when that variable is set (for the docs).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::Duration;

use crate::common::Site;
use crate::common::{
    connect, read_response, serve_in_memory as serve, start, trivial, undated, Raw,
};
use unflat_server::{Running, Strategy};

/// What a vector must get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// This status, the decoded body when given (raw echo), and the
    /// connection kept: the pipelined request behind it is answered `aa`.
    Served {
        status: u16,
        body: Option<&'static [u8]>,
    },
    /// This status and `Connection: close`, then the connection closes with
    /// nothing more answered.
    Refused(u16),
}

use Verdict::{Refused, Served};

/// Served with `status`, body not checked.
const fn served(status: u16) -> Verdict {
    Served { status, body: None }
}

/// Served 200 by the raw echo with exactly `body`.
const fn echoed(body: &'static [u8]) -> Verdict {
    Served {
        status: 200,
        body: Some(body),
    }
}

/// One framing vector.
struct Vector {
    name: &'static str,
    /// `llhttp test/request/<file>.md "<section>"` and/or the RFC section.
    source: &'static str,
    /// llhttp's outcome in its default mode.
    llhttp: &'static str,
    bytes: Vec<u8>,
    expect: Verdict,
}

fn v(
    name: &'static str,
    source: &'static str,
    llhttp: &'static str,
    bytes: impl AsRef<[u8]>,
    expect: Verdict,
) -> Vector {
    Vector {
        name,
        source,
        llhttp,
        bytes: bytes.as_ref().to_vec(),
        expect,
    }
}

/// Sent behind every vector on the same connection.
const NEXT: &[u8] = b"GET /end-string/2 HTTP/1.1\r\nHost: x\r\n\r\n";

/// The head the chunked-body vectors share.
const CHUNKED: &[u8] =
    b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";

/// `CHUNKED` followed by `body`.
fn chunked(body: impl AsRef<[u8]>) -> Vec<u8> {
    [CHUNKED, body.as_ref()].concat()
}

/// `--max-head` and `--max-fields` by default, which the trailer section
/// shares with the head.
const MAX_HEAD: usize = 16 * 1024;
const MAX_FIELDS: usize = 100;
/// The chunk-extension cap per body (16 KiB).
const MAX_EXTENSIONS: usize = 16 * 1024;

const NOT_IN_CORPUS: &str = "not in corpus";

/// A certificate sent folded over many lines (llhttp `sample.md`
/// "X-SSL-Nonsense"), `Host: x` added.
const X_SSL_NONSENSE: &[u8] = b"\
    GET / HTTP/1.1\r\n\
    Host: x\r\n\
    X-SSL-Nonsense:   -----BEGIN CERTIFICATE-----\r\n\
    \tMIIFbTCCBFWgAwIBAgICH4cwDQYJKoZIhvcNAQEFBQAwcDELMAkGA1UEBhMCVUsx\r\n\
    \tETAPBgNVBAoTCGVTY2llbmNlMRIwEAYDVQQLEwlBdXRob3JpdHkxCzAJBgNVBAMT\r\n\
    \tAkNBMS0wKwYJKoZIhvcNAQkBFh5jYS1vcGVyYXRvckBncmlkLXN1cHBvcnQuYWMu\r\n\
    \tdWswHhcNMDYwNzI3MTQxMzI4WhcNMDcwNzI3MTQxMzI4WjBbMQswCQYDVQQGEwJV\r\n\
    \tSzERMA8GA1UEChMIZVNjaWVuY2UxEzARBgNVBAsTCk1hbmNoZXN0ZXIxCzAJBgNV\r\n\
    \tBAcTmrsogriqMWLAk1DMRcwFQYDVQQDEw5taWNoYWVsIHBhcmQYJKoZIhvcNAQEB\r\n\
    \tBQADggEPADCCAQoCggEBANPEQBgl1IaKdSS1TbhF3hEXSl72G9J+WC/1R64fAcEF\r\n\
    \tW51rEyFYiIeZGx/BVzwXbeBoNUK41OK65sxGuflMo5gLflbwJtHBRIEKAfVVp3YR\r\n\
    \tgW7cMA/s/XKgL1GEC7rQw8lIZT8RApukCGqOVHSi/F1SiFlPDxuDfmdiNzL31+sL\r\n\
    \t0iwHDdNkGjy5pyBSB8Y79dsSJtCW/iaLB0/n8Sj7HgvvZJ7x0fr+RQjYOUUfrePP\r\n\
    \tu2MSpFyf+9BbC/aXgaZuiCvSR+8Snv3xApQY+fULK/xY8h8Ua51iXoQ5jrgu2SqR\r\n\
    \twgA7BUi3G8LFzMBl8FRCDYGUDy7M6QaHXx1ZWIPWNKsCAwEAAaOCAiQwggIgMAwG\r\n\
    \tA1UdEwEB/wQCMAAwEQYJYIZIAYb4QgHTTPAQDAgWgMA4GA1UdDwEB/wQEAwID6DAs\r\n\
    \tBglghkgBhvhCAQ0EHxYdVUsgZS1TY2llbmNlIFVzZXIgQ2VydGlmaWNhdGUwHQYD\r\n\
    \tVR0OBBYEFDTt/sf9PeMaZDHkUIldrDYMNTBZMIGaBgNVHSMEgZIwgY+AFAI4qxGj\r\n\
    \tloCLDdMVKwiljjDastqooXSkcjBwMQswCQYDVQQGEwJVSzERMA8GA1UEChMIZVNj\r\n\
    \taWVuY2UxEjAQBgNVBAsTCUF1dGhvcml0eTELMAkGA1UEAxMCQ0ExLTArBgkqhkiG\r\n\
    \t9w0BCQEWHmNhLW9wZXJhdG9yQGdyaWQtc3VwcG9ydC5hYy51a4IBADApBgNVHRIE\r\n\
    \tIjAggR5jYS1vcGVyYXRvckBncmlkLXN1cHBvcnQuYWMudWswGQYDVR0gBBIwEDAO\r\n\
    \tBgwrBgEEAdkvAQEBAQYwPQYJYIZIAYb4QgEEBDAWLmh0dHA6Ly9jYS5ncmlkLXN1\r\n\
    \tcHBvcnQuYWMudmT4sopwqlBWsvcHViL2NybC9jYWNybC5jcmwwPQYJYIZIAYb4QgEDBDAWLmh0\r\n\
    \tdHA6Ly9jYS5ncmlkLXN1cHBvcnQuYWMudWsvcHViL2NybC9jYWNybC5jcmwwPwYD\r\n\
    \tVR0fBDgwNjA0oDKgMIYuaHR0cDovL2NhLmdyaWQt5hYy51ay9wdWIv\r\n\
    \tY3JsL2NhY3JsLmNybDANBgkqhkiG9w0BAQUFAAOCAQEAS/U4iiooBENGW/Hwmmd3\r\n\
    \tXCy6Zrt08YjKCzGNjorT98g8uGsqYjSxv/hmi0qlnlHs+k/3Iobc3LjS5AMYr5L8\r\n\
    \tUO7OSkgFFlLHQyC9JzPfmLCAugvzEbyv4Olnsr8hbxF1MbKZoQxUZtMVu29wjfXk\r\n\
    \thTeApBv7eaKCWpSp7MCbvgzm74izKhu3vlDk9w6qVrxePfGgpKPqfHiOoGhFnbTK\r\n\
    \twTC6o2xq5y0qZ03JonF7OJspEd3I5zKY3E+ov7/ZhW6DqT8UFvsAdjvQbXyhV8Eu\r\n\
    \tYhixw1aKEPzNjNowuIseVogKOLXxWI5vAi5HgXdS0/ES5gDGsABo4fqovUKlgop3\r\n\
    \tRA==\r\n\
    \t-----END CERTIFICATE-----\r\n\
    \r\n\
    ";

#[rustfmt::skip]
fn vectors() -> Vec<Vector> {
    vec![
        // ---- Content-Length and Transfer-Encoding (RFC 9112 §6) ----
        v("TE chunked, empty body",
          r#"llhttp test/request/transfer-encoding.md "Parsing and setting flag"; RFC 9112 §6.1, §7.1"#,
          "accepted",
          b"PUT /echo?format=raw HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
          echoed(b"")),
        v("CL then TE identity",
          r#"llhttp test/request/content-length.md "Error on simultaneous `Content-Length` and `Transfer-Encoding: identity`"; RFC 9112 §6.1, §6.3 items 3-4"#,
          "HPE_INVALID_TRANSFER_ENCODING",
          b"PUT /url HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: identity\r\n\r\n",
          Refused(400)),
        v("TE identity then CL",
          r#"llhttp test/request/transfer-encoding.md "POST with `Transfer-Encoding` and `Content-Length`"; RFC 9112 §6.1, §6.3 items 3-4"#,
          "HPE_INVALID_CONTENT_LENGTH",
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nAccept: */*\r\nTransfer-Encoding: identity\r\nContent-Length: 5\r\n\r\nWorld",
          Refused(400)),
        v("CL then three empty TE lines",
          r#"llhttp test/request/transfer-encoding.md "POST with empty `Transfer-Encoding` and `Content-Length` (lenient)"; RFC 9112 §6.3 items 3-4"#,
          "HPE_INVALID_TRANSFER_ENCODING",
          b"POST / HTTP/1.1\r\nHost: foo\r\nContent-Length: 10\r\nTransfer-Encoding:\r\nTransfer-Encoding:\r\nTransfer-Encoding:\r\n\r\n2\r\nAA\r\n0",
          Refused(400)),
        v("empty TE alone",
          "RFC 9112 §6.3 item 4",
          NOT_IN_CORPUS,
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
          Refused(400)),
        v("TE pigeons (chunked absent)",
          r#"llhttp test/request/transfer-encoding.md "Ignoring `pigeons`"; RFC 9112 §6.3 item 4"#,
          "HPE_INVALID_TRANSFER_ENCODING",
          b"PUT /url HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: pigeons\r\n\r\n",
          Refused(400)),
        v("TE chunkedchunked",
          r#"llhttp test/request/transfer-encoding.md "POST with `chunkedchunked` as transfer-encoding"; RFC 9112 §6.3 item 4"#,
          "HPE_INVALID_TRANSFER_ENCODING",
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nAccept: */*\r\nTransfer-Encoding: chunkedchunked\r\n\r\n5\r\nWorld\r\n0\r\n\r\n",
          Refused(400)),
        v("TE chunked, deflate (chunked not last)",
          r#"llhttp test/request/transfer-encoding.md "POST with `chunked` before other transfer coding names"; RFC 9112 §6.1, §6.3 item 4"#,
          "HPE_INVALID_TRANSFER_ENCODING",
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nAccept: */*\r\nTransfer-Encoding: chunked, deflate\r\n\r\nWorld",
          Refused(400)),
        v("TE chunked then TE deflate on two lines",
          r#"llhttp test/request/transfer-encoding.md "POST with `chunked` and duplicate transfer-encoding"; RFC 9110 §5.3, RFC 9112 §6.3 item 4"#,
          "HPE_INVALID_TRANSFER_ENCODING",
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nAccept: */*\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: deflate\r\n\r\nWorld",
          Refused(400)),
        v("TE deflate, chunked (unknown coding)",
          r#"llhttp test/request/transfer-encoding.md "POST with `chunked` as last transfer-encoding"; RFC 9112 §6.1 (SHOULD 501)"#,
          "accepted",
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nAccept: */*\r\nTransfer-Encoding: deflate, chunked\r\n\r\n5\r\nWorld\r\n0\r\n\r\n",
          Refused(501)),
        v("TE deflate then TE chunked on two lines",
          r#"llhttp test/request/transfer-encoding.md "POST with `chunked` as last transfer-encoding (multiple headers)"; RFC 9112 §6.1 (SHOULD 501)"#,
          "accepted",
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nAccept: */*\r\nTransfer-Encoding: deflate\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nWorld\r\n0\r\n\r\n",
          Refused(501)),
        v("TE chunked continued by obs-fold",
          r#"llhttp test/request/transfer-encoding.md "Invalid OBS fold after chunked value"; RFC 9112 §5.2, §6.3 item 4"#,
          "HPE_INVALID_TRANSFER_ENCODING (request-lenient-headers)",
          b"PUT /url HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n  abc\r\n\r\n5\r\nWorld\r\n0\r\n\r\n",
          Refused(400)),
        v("TE chunked, chunked",
          "RFC 9112 §6.1 (chunked MUST NOT be applied twice)",
          "not in corpus (source: HPE_INVALID_TRANSFER_ENCODING)",
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
          Refused(400)),
        v("TE chunked on two lines",
          "RFC 9110 §5.3, RFC 9112 §6.1",
          NOT_IN_CORPUS,
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
          Refused(400)),
        v("TE CHUNKED in upper case",
          "RFC 9112 §7 (coding names are case-insensitive)",
          NOT_IN_CORPUS,
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: CHUNKED\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
          echoed(b"abc")),
        v("TE chunked between HTAB OWS",
          "RFC 9112 §5.1 (OWS around the value)",
          NOT_IN_CORPUS,
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\tchunked\t\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
          echoed(b"abc")),
        v("TE chunked after a vertical tab",
          "RFC 9110 §5.5 (no CTL in a field value)",
          NOT_IN_CORPUS,
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\x0bchunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
          Refused(400)),
        v("TE name with SP before the colon",
          "RFC 9112 §5.1 (MUST 400)",
          NOT_IN_CORPUS,
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
          Refused(400)),
        v("TE chunked in HTTP/1.0",
          "RFC 9112 §6.1 (framing faulty, close)",
          "not in corpus (source: decoded as chunked)",
          b"POST /echo?format=raw HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
          Refused(400)),
        v("CL and TE chunked, hidden request (CL.TE)",
          "RFC 9112 §6.1, §6.3 item 3, §11.2",
          NOT_IN_CORPUS,
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /end-string/7 HTTP/1.1\r\nHost: x\r\n\r\n",
          Refused(400)),
        v("CL 003 (leading zeros)",
          r#"llhttp test/request/content-length.md "`Content-Length` with zeroes"; RFC 9110 §8.6"#,
          "accepted",
          b"PUT /echo?format=raw HTTP/1.1\r\nHost: x\r\nContent-Length: 003\r\n\r\nabc",
          echoed(b"abc")),
        v("CL 003 with a field after it",
          r#"llhttp test/request/content-length.md "`Content-Length` with follow-up headers"; RFC 9110 §8.6"#,
          "accepted",
          b"PUT /echo?format=raw HTTP/1.1\r\nHost: x\r\nContent-Length: 003\r\nOhai: world\r\n\r\nabc",
          echoed(b"abc")),
        v("conTENT-Length on an HTTP/1.0 GET",
          r#"llhttp test/request/content-length.md "Funky `Content-Length` with body"; RFC 9110 §5.1, RFC 9112 §6.3 item 5"#,
          "accepted",
          b"GET /echo?format=raw HTTP/1.0\r\nConnection: keep-alive\r\nconTENT-Length: 5\r\n\r\nHELLO",
          echoed(b"HELLO")),
        v("CL with SP around the value",
          r#"llhttp test/request/content-length.md "Spaces in `Content-Length` (surrounding)"; RFC 9112 §5.1"#,
          "accepted",
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nContent-Length:  42 \r\n\r\n0123456789abcdefghijklmnopqrstuvwxyzABCDEF",
          echoed(b"0123456789abcdefghijklmnopqrstuvwxyzABCDEF")),
        v("CL with HTAB around the value",
          r#"llhttp test/request/content-length.md "Tabs in `Content-Length` (surrounding)"; RFC 9112 §5.1"#,
          "accepted",
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nContent-Length:\t42\t  \r\n\r\n0123456789abcdefghijklmnopqrstuvwxyzABCDEF",
          echoed(b"0123456789abcdefghijklmnopqrstuvwxyzABCDEF")),
        v("CL 4 2 (inner SP)",
          r#"llhttp test/request/content-length.md "Spaces in `Content-Length` #2"; RFC 9112 §6.3 item 5"#,
          "HPE_INVALID_CONTENT_LENGTH",
          b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4 2\r\n\r\n",
          Refused(400)),
        v("CL 13 37 (inner SP)",
          r#"llhttp test/request/content-length.md "Spaces in `Content-Length` #3"; RFC 9112 §6.3 item 5"#,
          "HPE_INVALID_CONTENT_LENGTH",
          b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 13 37\r\n\r\n",
          Refused(400)),
        v("CL empty",
          r#"llhttp test/request/content-length.md "Empty `Content-Length`"; RFC 9112 §6.3 item 5"#,
          "HPE_INVALID_CONTENT_LENGTH",
          b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\r\n",
          Refused(400)),
        v("CL overflowing 64 bits",
          r#"llhttp test/request/content-length.md "Error on `Content-Length` overflow"; RFC 9110 §8.6"#,
          "HPE_INVALID_CONTENT_LENGTH",
          b"PUT /url HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000000000000\r\n\r\n",
          Refused(400)),
        v("CL 1 then CL 2",
          r#"llhttp test/request/content-length.md "Error on duplicate `Content-Length`"; RFC 9112 §6.3 item 5"#,
          "HPE_UNEXPECTED_CONTENT_LENGTH",
          b"PUT /url HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
          Refused(400)),
        v("CL 3 twice (identical lines)",
          "RFC 9112 §6.3 item 5 (MAY accept identical values)",
          "not in corpus (source: HPE_UNEXPECTED_CONTENT_LENGTH)",
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
          echoed(b"abc")),
        v("CL 3, 3 (identical list)",
          "RFC 9110 §8.6, RFC 9112 §6.3 item 5 (MAY accept)",
          "not in corpus (source: HPE_INVALID_CONTENT_LENGTH)",
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\n\r\nabc",
          echoed(b"abc")),
        v("CL 3, 4 (conflicting list)",
          "RFC 9112 §6.3 item 5",
          NOT_IN_CORPUS,
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 4\r\n\r\nabcd",
          Refused(400)),
        v("CL +3 (signed)",
          "RFC 9110 §8.6 (1*DIGIT)",
          NOT_IN_CORPUS,
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\nabc",
          Refused(400)),
        v("CL -1 (negative)",
          "RFC 9110 §8.6 (1*DIGIT)",
          NOT_IN_CORPUS,
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
          Refused(400)),
        v("CL name with SP before the colon",
          r#"llhttp test/request/content-length.md "Invalid whitespace token with `Content-Length` header field"; RFC 9112 §5.1 (MUST 400)"#,
          "HPE_INVALID_HEADER_TOKEN",
          b"PUT /url HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nContent-Length : 4\r\nUpgrade: ws\r\n\r\nabcdefgh",
          Refused(400)),
        v("CL over --max-body",
          "RFC 9110 §15.5.14 (413)",
          NOT_IN_CORPUS,
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nContent-Length: 1048577\r\n\r\n",
          Refused(413)),

        // ---- chunk-size lines (RFC 9112 §7.1) ----
        v("chunk size in lower-case hex",
          r#"llhttp test/request/transfer-encoding.md "Parse chunks with lowercase size"; RFC 9112 §7.1"#,
          "accepted",
          chunked("a\r\n0123456789\r\n0\r\n\r\n"),
          echoed(b"0123456789")),
        v("chunk size in upper-case hex",
          r#"llhttp test/request/transfer-encoding.md "Parse chunks with uppercase size"; RFC 9112 §7.1"#,
          "accepted",
          chunked("A\r\n0123456789\r\n0\r\n\r\n"),
          echoed(b"0123456789")),
        v("two-digit chunk size",
          r#"llhttp test/request/transfer-encoding.md "POST with `Transfer-Encoding: chunked`"; RFC 9112 §7.1"#,
          "accepted",
          chunked("1e\r\nall your base are belong to us\r\n0\r\n\r\n"),
          echoed(b"all your base are belong to us")),
        v("last chunk 000",
          r#"llhttp test/request/transfer-encoding.md "Two chunks and triple zero prefixed end chunk"; RFC 9112 §7.1 (last-chunk = 1*"0")"#,
          "accepted",
          chunked("5\r\nhello\r\n6\r\n world\r\n000\r\n\r\n"),
          echoed(b"hello world")),
        v("many one-byte chunks",
          "RFC 9112 §7.1",
          NOT_IN_CORPUS,
          chunked("1\r\na\r\n1\r\nb\r\n1\r\nc\r\n1\r\nd\r\n0\r\n\r\n"),
          echoed(b"abcd")),
        v("chunk size 0005 (leading zeros)",
          "RFC 9112 §7.1 (chunk-size = 1*HEXDIG)",
          "not in corpus (source: accepted)",
          chunked("0005\r\nhello\r\n0\r\n\r\n"),
          echoed(b"hello")),
        v("chunk size with 19 leading zeros",
          "RFC 9112 §7.1 (chunk-size = 1*HEXDIG)",
          NOT_IN_CORPUS,
          chunked("00000000000000000005\r\nhello\r\n0\r\n\r\n"),
          echoed(b"hello")),
        v("chunk size with 40 leading zeros",
          "RFC 9112 §7.1 (chunk-size = 1*HEXDIG)",
          NOT_IN_CORPUS,
          chunked("00000000000000000000000000000000000000005\r\nhello\r\n0\r\n\r\n"),
          echoed(b"hello")),
        v("last chunk of 24 zeros",
          "RFC 9112 §7.1 (last-chunk = 1*\"0\")",
          NOT_IN_CORPUS,
          chunked("5\r\nhello\r\n000000000000000000000000\r\n\r\n"),
          echoed(b"hello")),
        v("missing last chunk (CRLF where a size is due)",
          r#"llhttp test/request/transfer-encoding.md "Missing last-chunk"; RFC 9112 §7.1"#,
          "HPE_INVALID_CHUNK_SIZE",
          chunked("3\r\nfoo\r\n\r\n"),
          Refused(400)),
        v("SP then bare LF after the size",
          r#"llhttp test/request/transfer-encoding.md "Validate chunk parameters"; RFC 9112 §7.1.1"#,
          "HPE_INVALID_CHUNK_SIZE",
          chunked("3 \n  \r\nfoo\r\n\r\n"),
          Refused(400)),
        v("SP after the size, no extension",
          r#"llhttp test/request/transfer-encoding.md "Space after chunk header"; RFC 9112 §7.1.1 (BWS only before ";")"#,
          "HPE_INVALID_CHUNK_SIZE",
          chunked("a \r\n0123456789\r\n0\r\n\r\n"),
          Refused(400)),
        v("SP after the last chunk's size",
          "RFC 9112 §7.1.1",
          NOT_IN_CORPUS,
          chunked("3\r\nabc\r\n0 \r\n\r\n"),
          Refused(400)),
        v("text after the size without a semicolon",
          r#"llhttp test/request/transfer-encoding.md "No semicolon before chunk extensions"; RFC 9112 §7.1.1"#,
          "HPE_INVALID_CHUNK_SIZE",
          b"POST /echo?format=raw HTTP/1.1\r\nHost: localhost\r\nTransfer-encoding: chunked\r\n\r\n2 erfrferferf\r\naa\r\n0 rrrr\r\n\r\n",
          Refused(400)),
        v("bare CR after the size, hidden request",
          r#"llhttp test/request/transfer-encoding.md "Chunk header not terminated by CRLF"; RFC 9112 §2.2, §7.1"#,
          "HPE_STRICT",
          b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close \r\nTransfer-Encoding: chunked \r\n\r\n5\r\r;ABCD\r\n34\r\nE\r\n0\r\n\r\nGET / HTTP/1.1 \r\nHost: a\r\nContent-Length: 5\r\n\r\n0\r\n",
          Refused(400)),
        v("bare CR after the size",
          "RFC 9112 §2.2, §7.1",
          "not in corpus (source: HPE_STRICT)",
          chunked("3\rabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("bare LF after the size",
          "RFC 9112 §7.1 (CRLF)",
          "not in corpus (source: HPE_CR_EXPECTED)",
          chunked("3\nabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("bare LF after the last chunk's size",
          "RFC 9112 §7.1 (CRLF)",
          "not in corpus (source: HPE_CR_EXPECTED)",
          chunked("3\r\nabc\r\n0\n\r\n"),
          Refused(400)),
        v("extension without a size, hidden request",
          "RFC 9112 §7.1 (chunk-size = 1*HEXDIG), §11.2",
          NOT_IN_CORPUS,
          chunked(";x\r\n\r\nGET /end-string/7 HTTP/1.1\r\nHost: x\r\n\r\n"),
          Refused(400)),
        v("empty size line, hidden request",
          "RFC 9112 §7.1, §11.2",
          NOT_IN_CORPUS,
          chunked("\r\n\r\nGET /end-string/7 HTTP/1.1\r\nHost: x\r\n\r\n"),
          Refused(400)),
        v("chunk size not hex (zz)",
          "RFC 9112 §7.1",
          NOT_IN_CORPUS,
          chunked("zz\r\n0\r\n\r\n"),
          Refused(400)),
        v("chunk size 0x3",
          "RFC 9112 §7.1",
          NOT_IN_CORPUS,
          chunked("0x3\r\nabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("chunk size -3",
          "RFC 9112 §7.1",
          NOT_IN_CORPUS,
          chunked("-3\r\nabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("chunk size +3",
          "RFC 9112 §7.1",
          NOT_IN_CORPUS,
          chunked("+3\r\nabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("SP before the size",
          "RFC 9112 §7.1",
          NOT_IN_CORPUS,
          chunked(" 3\r\nabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("chunk size 2^64 (17 digits)",
          "RFC 9112 §7.1 (recipients MUST anticipate overflow), §7.1.3",
          "not in corpus (source: HPE_INVALID_CHUNK_SIZE)",
          chunked("10000000000000000\r\nabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("chunk size of 17 f",
          "RFC 9112 §7.1",
          "not in corpus (source: HPE_INVALID_CHUNK_SIZE)",
          chunked("fffffffffffffffff\r\nabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("chunk size 2^64-1, over --max-body",
          "RFC 9110 §15.5.14 (413)",
          NOT_IN_CORPUS,
          chunked("ffffffffffffffff\r\nabc\r\n0\r\n\r\n"),
          Refused(413)),
        v("chunk size 1 MiB + 1, over --max-body",
          "RFC 9110 §15.5.14 (413)",
          NOT_IN_CORPUS,
          chunked("100001\r\nabc\r\n0\r\n\r\n"),
          Refused(413)),

        // ---- chunk extensions (RFC 9112 §7.1.1) ----
        v("extensions: names and token values",
          r#"llhttp test/request/transfer-encoding.md "Chunk extensions"; RFC 9112 §7.1.1"#,
          "accepted",
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;ilovew3;somuchlove=aretheseparametersfor;another=withvalue\r\nhello\r\n6;blahblah;blah\r\n world\r\n0\r\n\r\n",
          echoed(b"hello world")),
        v("extension `;` without a name",
          r#"llhttp test/request/transfer-encoding.md "No extension after semicolon"; RFC 9112 §7.1.1"#,
          "HPE_STRICT",
          b"POST /echo?format=raw HTTP/1.1\r\nHost: localhost\r\nTransfer-encoding: chunked\r\n\r\n2;\r\naa\r\n0\r\n\r\n",
          Refused(400)),
        v("extensions: quoted strings and quoted-pairs",
          r#"llhttp test/request/transfer-encoding.md "Chunk extensions quoting"; RFC 9112 §7.1.1, RFC 9110 §5.6.4"#,
          "accepted",
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;ilovew3=\"I \\\"love\\\"; \\\\extensions\\\\\";somuchlove=\"aretheseparametersfor\";blah;foo=bar\r\nhello\r\n6;blahblah;blah\r\n world\r\n0\r\n\r\n",
          echoed(b"hello world")),
        v("extension quoted string not closed",
          r#"llhttp test/request/transfer-encoding.md "Unbalanced chunk extensions quoting"; RFC 9110 §5.6.4"#,
          "HPE_STRICT",
          b"POST /echo?format=raw HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;ilovew3=\"abc\";somuchlove=\"def; ghi\r\nhello\r\n6;blahblah;blah\r\n world\r\n0\r\n\r\n",
          Refused(400)),
        v("extension BWS (SP) around ; and =",
          "RFC 9112 §7.1.1 (BWS)",
          "not in corpus (source: HPE_INVALID_CHUNK_SIZE)",
          chunked("3 ; a = b ;c\r\nabc\r\n0\r\n\r\n"),
          echoed(b"abc")),
        v("extension BWS (HTAB) around ; and =",
          "RFC 9112 §7.1.1 (BWS)",
          "not in corpus (source: HPE_INVALID_CHUNK_SIZE)",
          chunked("3\t;\ta\t=\t\"b\"\t;\tc\r\nabc\r\n0\r\n\r\n"),
          echoed(b"abc")),
        v("extension then SP before CRLF",
          "RFC 9112 §7.1.1 (BWS only before ; or =)",
          "not in corpus (source: HPE_STRICT)",
          chunked("3;a=b \r\nabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("extension name then SP before CRLF",
          "RFC 9112 §7.1.1",
          "not in corpus (source: HPE_STRICT)",
          chunked("3;a \r\nabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("extension tokens of every tchar",
          "RFC 9112 §7.1.1, RFC 9110 §5.6.2",
          NOT_IN_CORPUS,
          chunked("3;!#$%&'*+-.^_`|~09AZaz=!#$%&'*+-.^_`|~09AZaz\r\nabc\r\n0\r\n\r\n"),
          echoed(b"abc")),
        v("extension empty quoted string",
          "RFC 9110 §5.6.4",
          NOT_IN_CORPUS,
          chunked("3;a=\"\"\r\nabc\r\n0\r\n\r\n"),
          echoed(b"abc")),
        v("extension quoted HTAB and obs-text",
          "RFC 9110 §5.6.4 (qdtext)",
          NOT_IN_CORPUS,
          chunked(b"3;a=\"b\tc\xe9\"\r\nabc\r\n0\r\n\r\n"),
          echoed(b"abc")),
        v("extension quoted-pair of HTAB and obs-text",
          "RFC 9110 §5.6.4 (quoted-pair)",
          NOT_IN_CORPUS,
          chunked(b"3;a=\"\\\t\\\xff\"\r\nabc\r\n0\r\n\r\n"),
          echoed(b"abc")),
        v("extension on the last chunk",
          "RFC 9112 §7.1 (last-chunk [ chunk-ext ])",
          NOT_IN_CORPUS,
          chunked("3\r\nabc\r\n0;a=b;c=\"d\"\r\n\r\n"),
          echoed(b"abc")),
        v("extension with no value after =",
          "RFC 9112 §7.1.1",
          NOT_IN_CORPUS,
          chunked("3;a=\r\nabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("extension with no name before =",
          "RFC 9112 §7.1.1",
          NOT_IN_CORPUS,
          chunked("3;=b\r\nabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("extension name with @",
          "RFC 9112 §7.1.1 (token)",
          NOT_IN_CORPUS,
          chunked("3;a@b\r\nabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("extension token value with =",
          "RFC 9112 §7.1.1 (token)",
          NOT_IN_CORPUS,
          chunked("3;a=b=c\r\nabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("extension quoted string followed by a token",
          "RFC 9112 §7.1.1",
          NOT_IN_CORPUS,
          chunked("3;a=\"x\"y\r\nabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("extension name with 0x01",
          "RFC 9112 §7.1.1 (token)",
          "not in corpus (source: HPE_STRICT)",
          chunked(b"3;a\x01\r\nabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("extension token value 0x01",
          "RFC 9112 §7.1.1 (token)",
          "not in corpus (source: HPE_STRICT)",
          chunked(b"3;a=\x01\r\nabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("extension quoted 0x01",
          "RFC 9110 §5.6.4 (qdtext)",
          "not in corpus (source: HPE_STRICT)",
          chunked(b"3;a=\"\x01\"\r\nabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("extension quoted-pair of 0x01",
          "RFC 9110 §5.6.4 (quoted-pair)",
          "not in corpus (source: HPE_STRICT)",
          chunked(b"3;a=\"\\\x01\"\r\nabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("extension NUL after ;",
          "RFC 9112 §7.1.1",
          "not in corpus (harness cannot send NUL)",
          chunked(b"3;\0\r\nabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("extension name with NUL",
          "RFC 9112 §7.1.1 (token)",
          "not in corpus (harness cannot send NUL)",
          chunked(b"3;a\0b\r\nabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("extension quoted NUL",
          "RFC 9110 §5.6.4 (qdtext)",
          "not in corpus (harness cannot send NUL)",
          chunked(b"3;a=\"\0\"\r\nabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("extension name with DEL",
          "RFC 9112 §7.1.1 (token)",
          "not in corpus (source: HPE_STRICT)",
          chunked(b"3;a\x7f\r\nabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("extension quoted DEL",
          "RFC 9110 §5.6.4 (qdtext)",
          "not in corpus (source: HPE_STRICT)",
          chunked(b"3;a=\"\x7f\"\r\nabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("bare LF after `;`, hidden request",
          "RFC 9112 §7.1, §7.1.1, §11.2",
          NOT_IN_CORPUS,
          chunked("2;\nxx\r\n45\r\n0\r\n\r\nGET /end-string/7 HTTP/1.1\r\nHost: x\r\n\r\n"),
          Refused(400)),
        v("bare LF after an extension name",
          "RFC 9112 §7.1 (CRLF)",
          "not in corpus (source: HPE_CR_EXPECTED)",
          chunked("2;a\nxx\r\n0\r\n\r\n"),
          Refused(400)),
        v("bare LF after an extension value",
          "RFC 9112 §7.1 (CRLF)",
          "not in corpus (source: HPE_CR_EXPECTED)",
          chunked("2;a=b\nxx\r\n0\r\n\r\n"),
          Refused(400)),
        v("bare LF after a quoted extension value",
          "RFC 9112 §7.1 (CRLF)",
          "not in corpus (source: HPE_CR_EXPECTED)",
          chunked("2;a=\"b\"\nxx\r\n0\r\n\r\n"),
          Refused(400)),
        v("bare CR after an extension name",
          "RFC 9112 §2.2, §7.1",
          "not in corpus (source: HPE_STRICT)",
          chunked("2;a\rxx\r\n0\r\n\r\n"),
          Refused(400)),
        v("bare CR in a quoted extension value",
          "RFC 9112 §2.2, RFC 9110 §5.6.4",
          "not in corpus (source: HPE_STRICT)",
          chunked("2;a=\"b\rc\"\r\nxx\r\n0\r\n\r\n"),
          Refused(400)),
        v("extensions of 16 KiB in one chunk (at the cap)",
          "RFC 9112 §7.1.1 (extension limits are the server's)",
          NOT_IN_CORPUS,
          chunked(format!("1;{}\r\na\r\n0\r\n\r\n", "e".repeat(MAX_EXTENSIONS - 1))),
          echoed(b"a")),
        v("extensions of 16 KiB + 1 in one chunk",
          "RFC 9112 §7.1.1, RFC 9110 §15.5.1",
          NOT_IN_CORPUS,
          chunked(format!("1;{}\r\na\r\n0\r\n\r\n", "e".repeat(MAX_EXTENSIONS))),
          Refused(400)),
        v("extensions of 16 KiB over two chunks (at the cap)",
          "RFC 9112 §7.1.1",
          NOT_IN_CORPUS,
          chunked(format!(
              "1;{e}\r\na\r\n1;{e}\r\nb\r\n0\r\n\r\n",
              e = "e".repeat(MAX_EXTENSIONS / 2 - 1)
          )),
          echoed(b"ab")),
        v("extensions of 16 KiB + 1 over two chunks",
          "RFC 9112 §7.1.1, RFC 9110 §15.5.1",
          NOT_IN_CORPUS,
          chunked(format!(
              "1;{}\r\na\r\n1;{}\r\nb\r\n0\r\n\r\n",
              "e".repeat(MAX_EXTENSIONS / 2 - 1),
              "e".repeat(MAX_EXTENSIONS / 2)
          )),
          Refused(400)),
        v("extensions of 24 KiB over three chunks",
          "RFC 9112 §7.1.1, RFC 9110 §15.5.1",
          NOT_IN_CORPUS,
          chunked(format!(
              "1;{e}\r\na\r\n1;{e}\r\nb\r\n1;{e}\r\nc\r\n0\r\n\r\n",
              e = "e".repeat(8000)
          )),
          Refused(400)),
        v("extension cap passed by the last chunk's extension",
          "RFC 9112 §7.1.1, RFC 9110 §15.5.1",
          NOT_IN_CORPUS,
          chunked(format!("1;{}\r\na\r\n0;x\r\n\r\n", "e".repeat(MAX_EXTENSIONS - 2))),
          Refused(400)),

        // ---- the CRLF after chunk data (RFC 9112 §7.1) ----
        v("chunk data followed by 0 instead of CRLF",
          r#"llhttp test/request/transfer-encoding.md "Chunk data not terminated by CRLF"; RFC 9112 §7.1"#,
          "HPE_STRICT",
          b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close \r\nTransfer-Encoding: chunked \r\n\r\n5\r\nABCDE0\r\n",
          Refused(400)),
        v("extra CRLF after chunk data, hidden request",
          "RFC 9112 §7.1, §11.2",
          NOT_IN_CORPUS,
          chunked("3\r\nabc\r\n\r\n\r\nGET /end-string/7 HTTP/1.1\r\nHost: x\r\n\r\n"),
          Refused(400)),
        v("chunk data longer than its size",
          "RFC 9112 §7.1",
          NOT_IN_CORPUS,
          chunked("3\r\nabcd\r\n0\r\n\r\n"),
          Refused(400)),
        v("chunk data shorter than its size",
          "RFC 9112 §7.1",
          NOT_IN_CORPUS,
          chunked("4\r\nabc\r\n0\r\n\r\n"),
          Refused(400)),
        v("bare LF after chunk data",
          "RFC 9112 §7.1 (CRLF)",
          "not in corpus (source: HPE_CR_EXPECTED)",
          chunked("3\r\nabc\n0\r\n\r\n"),
          Refused(400)),
        v("bare CR after chunk data",
          "RFC 9112 §2.2, §7.1",
          "not in corpus (source: HPE_STRICT)",
          chunked("3\r\nabc\r0\r\n\r\n"),
          Refused(400)),
        v("chunk data holding CRLF",
          "RFC 9112 §7.1 (data is counted, not scanned)",
          NOT_IN_CORPUS,
          chunked("5\r\na\r\nbc\r\n0\r\n\r\n"),
          echoed(b"a\r\nbc")),

        // ---- trailer section (RFC 9112 §7.1.2) ----
        v("two trailer fields",
          r#"llhttp test/request/transfer-encoding.md "Trailing headers"; RFC 9112 §7.1.2"#,
          "accepted",
          chunked("5\r\nhello\r\n6\r\n world\r\n0\r\nVary: *\r\nContent-Type: text/plain\r\n\r\n"),
          echoed(b"hello world")),
        v("trailer with an empty value",
          "RFC 9112 §7.1.2, RFC 9110 §5.5",
          NOT_IN_CORPUS,
          chunked("3\r\nabc\r\n0\r\nX-A:\r\n\r\n"),
          echoed(b"abc")),
        v("trailer value with HTAB and obs-text",
          "RFC 9110 §5.5 (field-vchar, obs-text)",
          NOT_IN_CORPUS,
          chunked(b"3\r\nabc\r\n0\r\nX-A: caf\xe9\tau lait\r\n\r\n"),
          echoed(b"abc")),
        v("Content-Length as a trailer (not merged)",
          "RFC 9110 §6.5.1, §6.5.2",
          NOT_IN_CORPUS,
          chunked("3\r\nabc\r\n0\r\nContent-Length: 10\r\n\r\n"),
          echoed(b"abc")),
        v("Transfer-Encoding as a trailer (not merged)",
          "RFC 9110 §6.5.1, §6.5.2",
          NOT_IN_CORPUS,
          chunked("3\r\nabc\r\n0\r\nTransfer-Encoding: chunked\r\n\r\n"),
          echoed(b"abc")),
        v("trailer line without a colon",
          "RFC 9112 §5.1, §7.1.2",
          "not in corpus (source: HPE_INVALID_HEADER_TOKEN)",
          chunked("3\r\nabc\r\n0\r\nno-colon\r\n\r\n"),
          Refused(400)),
        v("trailer obs-fold",
          "RFC 9112 §5.2, §7.1.2",
          "not in corpus (source: HPE_INVALID_HEADER_TOKEN)",
          chunked("3\r\nabc\r\n0\r\nX-A: 1\r\n folded\r\n\r\n"),
          Refused(400)),
        v("trailer section starting with SP",
          "RFC 9112 §2.2, §7.1.2",
          NOT_IN_CORPUS,
          chunked("3\r\nabc\r\n0\r\n X-A: 1\r\n\r\n"),
          Refused(400)),
        v("trailer name with SP before the colon",
          "RFC 9112 §5.1 (MUST 400), §7.1.2",
          "not in corpus (source: HPE_INVALID_HEADER_TOKEN)",
          chunked("3\r\nabc\r\n0\r\nX-A : 1\r\n\r\n"),
          Refused(400)),
        v("trailer name empty",
          "RFC 9110 §5.1 (token)",
          NOT_IN_CORPUS,
          chunked("3\r\nabc\r\n0\r\n: v\r\n\r\n"),
          Refused(400)),
        v("trailer name with @",
          "RFC 9110 §5.1 (token)",
          NOT_IN_CORPUS,
          chunked("3\r\nabc\r\n0\r\nX@A: v\r\n\r\n"),
          Refused(400)),
        v("trailer value with bare CR",
          "RFC 9112 §2.2, RFC 9110 §5.5",
          "not in corpus (source: HPE_LF_EXPECTED)",
          chunked("3\r\nabc\r\n0\r\nX-A: a\rb\r\n\r\n"),
          Refused(400)),
        v("trailer value with NUL",
          "RFC 9110 §5.5",
          "not in corpus (harness cannot send NUL)",
          chunked(b"3\r\nabc\r\n0\r\nX-A: a\0b\r\n\r\n"),
          Refused(400)),
        v("trailer name with NUL",
          "RFC 9110 §5.1 (token)",
          "not in corpus (harness cannot send NUL)",
          chunked(b"3\r\nabc\r\n0\r\nX\0A: v\r\n\r\n"),
          Refused(400)),
        v("trailer value with 0x01",
          "RFC 9110 §5.5",
          "not in corpus (source: HPE_INVALID_HEADER_TOKEN)",
          chunked(b"3\r\nabc\r\n0\r\nX-A: a\x01b\r\n\r\n"),
          Refused(400)),
        v("trailer value with DEL",
          "RFC 9110 §5.5",
          "not in corpus (source: HPE_INVALID_HEADER_TOKEN)",
          chunked(b"3\r\nabc\r\n0\r\nX-A: a\x7fb\r\n\r\n"),
          Refused(400)),
        v("trailer line ended by bare LF",
          "RFC 9112 §7.1.2 (CRLF)",
          "not in corpus (source: HPE_CR_EXPECTED)",
          chunked("3\r\nabc\r\n0\r\nX-A: 1\n\r\n"),
          Refused(400)),
        v("trailer section ended by bare LF",
          "RFC 9112 §7.1 (CRLF)",
          "not in corpus (source: HPE_CR_EXPECTED)",
          chunked("3\r\nabc\r\n0\r\nX-A: 1\r\n\n"),
          Refused(400)),
        v("chunked body ended by bare LF",
          "RFC 9112 §7.1 (CRLF)",
          "not in corpus (source: HPE_CR_EXPECTED)",
          chunked("3\r\nabc\r\n0\r\n\n"),
          Refused(400)),
        v("request line swallowed as a trailer",
          "RFC 9112 §7.1.2, §11.2",
          NOT_IN_CORPUS,
          chunked("3\r\nabc\r\n0\r\nGET /end-string/7 HTTP/1.1\r\nHost: x\r\n\r\n"),
          Refused(400)),
        v("trailer section without its final CRLF",
          "RFC 9112 §7.1 (the next request becomes a trailer)",
          NOT_IN_CORPUS,
          chunked("3\r\nabc\r\n0\r\nX-A: 1\r\n"),
          Refused(400)),
        v("trailer section at what --max-head left",
          "RFC 9112 §7.1.2, RFC 6585 §5",
          NOT_IN_CORPUS,
          chunked(format!(
              "3\r\nabc\r\n0\r\nX: {}\r\n\r\n",
              "v".repeat(MAX_HEAD - CHUNKED.len() - 7)
          )),
          echoed(b"abc")),
        v("trailer section a byte over what --max-head left",
          "RFC 9112 §7.1.2, RFC 6585 §5 (431)",
          NOT_IN_CORPUS,
          chunked(format!(
              "3\r\nabc\r\n0\r\nX: {}\r\n\r\n",
              "v".repeat(MAX_HEAD - CHUNKED.len() - 6)
          )),
          Refused(431)),
        v("trailer fields at what --max-fields left",
          "RFC 9112 §7.1.2, RFC 6585 §5",
          NOT_IN_CORPUS,
          chunked(format!(
              "3\r\nabc\r\n0\r\n{}\r\n",
              (0..MAX_FIELDS - 2).map(|i| format!("T{i}: v\r\n")).collect::<String>()
          )),
          echoed(b"abc")),
        v("trailer fields one over what --max-fields left",
          "RFC 9112 §7.1.2, RFC 6585 §5 (431)",
          NOT_IN_CORPUS,
          chunked(format!(
              "3\r\nabc\r\n0\r\n{}\r\n",
              (0..MAX_FIELDS - 1).map(|i| format!("T{i}: v\r\n")).collect::<String>()
          )),
          Refused(431)),

        // ---- request line: target forms and version (RFC 9112 §2.3, §3) ----
        v("OPTIONS * (asterisk-form)",
          "RFC 9112 §3.2.4",
          "not in corpus (source: accepted)",
          b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
          served(204)),
        v("OPTIONS on a path",
          "RFC 9110 §9.3.7",
          NOT_IN_CORPUS,
          b"OPTIONS /end-string/2 HTTP/1.1\r\nHost: x\r\n\r\n",
          served(204)),
        v("GET * (asterisk-form, not OPTIONS)",
          "RFC 9112 §3.2.4",
          "not in corpus (source: accepted)",
          b"GET * HTTP/1.1\r\nHost: x\r\n\r\n",
          Refused(400)),
        v("M-SEARCH * (SSDP)",
          r#"llhttp test/request/method.md "M-SEARCH request"; RFC 9112 §3.2.4"#,
          "accepted",
          b"M-SEARCH * HTTP/1.1\r\nHOST: 239.255.255.250:1900\r\nMAN: \"ssdp:discover\"\r\nST: \"ssdp:all\"\r\n\r\n",
          Refused(400)),
        v("PRI * HTTP/1.1 with the h2 preface tail",
          r#"llhttp test/request/method.md "PRI request HTTP2"; RFC 9112 §3.2.4"#,
          "HPE_PAUSED_H2_UPGRADE (pause)",
          b"PRI * HTTP/1.1\r\n\r\nSM\r\n\r\n",
          Refused(400)),
        v("HTTP/2 connection preface",
          "RFC 9113 §3.4, RFC 9110 §15.6.6 (505)",
          NOT_IN_CORPUS,
          b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
          Refused(505)),
        v("origin-form without a leading /",
          "RFC 9112 §3.2.1",
          NOT_IN_CORPUS,
          b"GET end-string/2 HTTP/1.1\r\nHost: x\r\n\r\n",
          Refused(400)),
        v("target that is only a query",
          "RFC 9112 §3.2.1",
          NOT_IN_CORPUS,
          b"GET ?a=b HTTP/1.1\r\nHost: x\r\n\r\n",
          Refused(400)),
        v("fragment in the target",
          r#"llhttp test/request/uri.md "Fragment in URI"; RFC 9112 §3.2.1"#,
          "accepted",
          b"GET /forums/1/topics/2375?page=1#posts-17408 HTTP/1.1\r\nHost: x\r\n\r\n",
          Refused(400)),
        v("empty fragment in the target",
          "RFC 9112 §3.2.1",
          NOT_IN_CORPUS,
          b"GET /end-string/2# HTTP/1.1\r\nHost: x\r\n\r\n",
          Refused(400)),
        v("raw UTF-8 in the path",
          r#"llhttp test/request/uri.md "Disallow UTF-8 in URI path in strict mode"; RFC 9112 §3, §3.2.1, RFC 3986 §2"#,
          "HPE_INVALID_URL",
          b"GET /\xce\xb4\xc2\xb6/\xce\xb4t/pope?q=1 HTTP/1.1\r\nHost: github.com\r\n\r\n",
          Refused(400)),
        v("quotes and backslashes in the target",
          r#"llhttp test/request/uri.md "Quotes in URI"; RFC 9112 §3, §3.2.1, RFC 3986 §2"#,
          "accepted",
          b"GET /with_\"lovely\"_quotes?foo=\\\"bar\\\" HTTP/1.1\r\nHost: x\r\n\r\n",
          Refused(400)),
        v("| in the query",
          r#"llhttp test/request/uri.md "Query URL with vertical bar character"; RFC 9112 §3, RFC 3986 §3.4"#,
          "accepted",
          b"GET /test.cgi?query=| HTTP/1.1\r\nHost: x\r\n\r\n",
          Refused(400)),
        v("? inside the query",
          r#"llhttp test/request/uri.md "Query URL with question mark"; RFC 3986 §3.4"#,
          "accepted",
          b"GET /test.cgi?foo=bar?baz HTTP/1.1\r\nHost: x\r\n\r\n",
          served(404)),
        v("SP inside the target",
          r#"llhttp test/request/uri.md "Space in URI"; RFC 9112 §3"#,
          "HPE_INVALID_CONSTANT",
          b"GET /foo bar/ HTTP/1.1\r\nHost: x\r\n\r\n",
          Refused(400)),
        v("absolute-form, host ended by a query",
          r#"llhttp test/request/uri.md "Host terminated by a query string"; RFC 9112 §3.2.2, §2.2"#,
          "accepted",
          b"OPTIONS http://hypnotoad.org?hail=all HTTP/1.1\r\nHost: hypnotoad.org\r\n\r\n\r\n",
          served(204)),
        v("absolute-form, host:port ended by a query",
          r#"llhttp test/request/uri.md "`host:port` terminated by a query string"; RFC 9112 §3.2.2"#,
          "accepted",
          b"OPTIONS http://hypnotoad.org:1234?hail=all HTTP/1.1\r\nHost: hypnotoad.org:1234\r\n\r\n",
          served(204)),
        v("absolute-form, host:port ended by SP",
          r#"llhttp test/request/uri.md "`host:port` terminated by a space"; RFC 9112 §3.2.2"#,
          "accepted",
          b"GET http://hypnotoad.org:1234 HTTP/1.1\r\nHost: hypnotoad.org:1234\r\n\r\n",
          served(200)),
        v("absolute-form to the echo",
          "RFC 9112 §3.2.2",
          NOT_IN_CORPUS,
          b"POST http://x/echo?format=raw HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
          echoed(b"abc")),
        v("absolute-form, scheme in upper case",
          "RFC 9112 §3.2.2, RFC 3986 §3.1 (scheme case-insensitive)",
          NOT_IN_CORPUS,
          b"POST HTTPS://X/echo?format=raw HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
          echoed(b"abc")),
        v("absolute-form whose host differs from Host",
          "RFC 9112 §3.2.2 (the target's authority wins)",
          NOT_IN_CORPUS,
          b"POST http://a.example/echo?format=raw HTTP/1.1\r\nHost: b.example\r\nContent-Length: 3\r\n\r\nabc",
          echoed(b"abc")),
        v("absolute-form with userinfo",
          r#"llhttp test/request/uri.md "`host:port` and basic auth"; RFC 9110 §4.2.4 (SHOULD treat as an error)"#,
          "accepted",
          b"GET http://a%12:b!&*$@hypnotoad.org:1234/toto HTTP/1.1\r\nHost: hypnotoad.org:1234\r\n\r\n",
          Refused(400)),
        v("authority-form with GET",
          "RFC 9112 §3.2.3 (CONNECT only)",
          NOT_IN_CORPUS,
          b"GET x.example:80 HTTP/1.1\r\nHost: x.example:80\r\n\r\n",
          Refused(400)),
        v("CONNECT (HTTP/1.0) with tunnel data behind it",
          r#"llhttp test/request/method.md "CONNECT request"; RFC 9112 §3.2.3, RFC 9110 §9.3.6"#,
          "HPE_PAUSED_UPGRADE (pause)",
          b"CONNECT 0-home0.netscape.com:443 HTTP/1.0\r\nUser-agent: Mozilla/1.1N\r\nProxy-authorization: basic aGVsbG86d29ybGQ=\r\n\r\nsome data\r\nand yet even more data",
          Refused(501)),
        v("CONNECT (HTTP/1.0) in capitals",
          r#"llhttp test/request/method.md "CONNECT request with CAPS"; RFC 9112 §3.2.3"#,
          "HPE_PAUSED_UPGRADE (pause)",
          b"CONNECT HOME0.NETSCAPE.COM:443 HTTP/1.0\r\nUser-agent: Mozilla/1.1N\r\nProxy-authorization: basic aGVsbG86d29ybGQ=\r\n\r\n",
          Refused(501)),
        v("CONNECT (HTTP/1.0) with a Content-Length body",
          r#"llhttp test/request/method.md "CONNECT with body"; RFC 9112 §6.3 item 5, RFC 9110 §9.3.6"#,
          "HPE_PAUSED_UPGRADE (pause)",
          b"CONNECT foo.bar.com:443 HTTP/1.0\r\nUser-agent: Mozilla/1.1N\r\nProxy-authorization: basic aGVsbG86d29ybGQ=\r\nContent-Length: 10\r\n\r\nblarfcicle\"",
          Refused(501)),
        v("CONNECT (HTTP/1.0) to a host with _",
          r#"llhttp test/request/uri.md "Underscore in hostname"; RFC 3986 §3.2.2"#,
          "HPE_PAUSED_UPGRADE (pause)",
          b"CONNECT home_0.netscape.com:443 HTTP/1.0\r\nUser-agent: Mozilla/1.1N\r\nProxy-authorization: basic aGVsbG86d29ybGQ=\r\n\r\n",
          Refused(501)),
        v("CONNECT (HTTP/1.1), no tunnel data",
          "RFC 9112 §3.2.3, RFC 9110 §9.3.6 (closed after the refusal, so that tunnel bytes are never read as requests)",
          NOT_IN_CORPUS,
          b"CONNECT x.example:443 HTTP/1.1\r\nHost: x.example:443\r\n\r\n",
          Refused(501)),
        v("CONNECT to an origin-form target",
          "RFC 9112 §3.2.3",
          NOT_IN_CORPUS,
          b"CONNECT /x HTTP/1.1\r\nHost: x\r\n\r\n",
          Refused(400)),
        v("CONNECT to a host without a port",
          "RFC 9112 §3.2.3 (uri-host \":\" port)",
          NOT_IN_CORPUS,
          b"CONNECT x.example HTTP/1.1\r\nHost: x.example\r\n\r\n",
          Refused(400)),
        v("HTTP/1.2, processed as HTTP/1.1",
          "RFC 9112 §2.3, RFC 9110 §6.2",
          "not in corpus (source: HPE_INVALID_VERSION)",
          b"POST /echo?format=raw HTTP/1.2\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
          echoed(b"abc")),
        v("HTTP/1.9 with a chunked body",
          "RFC 9112 §2.3, RFC 9110 §6.2",
          "not in corpus (source: HPE_INVALID_VERSION)",
          b"POST /echo?format=raw HTTP/1.9\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
          echoed(b"abc")),
        v("HTTP/2.0",
          "RFC 9112 §2.3, RFC 9110 §15.6.6 (505)",
          "not in corpus (source: accepted)",
          b"GET /end-string/2 HTTP/2.0\r\nHost: x\r\n\r\n",
          Refused(505)),
        v("HTTP/0.9",
          "RFC 9110 §15.6.6 (505)",
          "not in corpus (source: accepted)",
          b"GET /end-string/2 HTTP/0.9\r\nHost: x\r\n\r\n",
          Refused(505)),
        v("HTTP/5.6",
          r#"llhttp test/request/invalid.md "Invalid HTTP version"; RFC 9112 §2.3, RFC 9110 §15.6.6 (505)"#,
          "HPE_INVALID_VERSION",
          b"GET / HTTP/5.6\r\nHost: x\r\n\r\n",
          Refused(505)),
        v("no HTTP version (HTTP/0.9 simple request)",
          r#"llhttp test/request/sample.md "No HTTP version"; RFC 9112 §3"#,
          "accepted",
          b"GET /\r\n\r\n",
          Refused(400)),
        v("http/1.1 in lower case",
          "RFC 9112 §2.3 (HTTP-name is case-sensitive)",
          NOT_IN_CORPUS,
          b"GET /end-string/2 http/1.1\r\nHost: x\r\n\r\n",
          Refused(400)),
        v("HTTP/1.10 (two-digit minor)",
          "RFC 9112 §2.3 (DIGIT \".\" DIGIT)",
          NOT_IN_CORPUS,
          b"GET /end-string/2 HTTP/1.10\r\nHost: x\r\n\r\n",
          Refused(400)),
        v("HTTP/1. (no minor)",
          "RFC 9112 §2.3",
          NOT_IN_CORPUS,
          b"GET /end-string/2 HTTP/1.\r\nHost: x\r\n\r\n",
          Refused(400)),
        v("SP after the version",
          "RFC 9112 §3",
          NOT_IN_CORPUS,
          b"GET /end-string/2 HTTP/1.1 \r\nHost: x\r\n\r\n",
          Refused(400)),
        v("ICE/1.0 with GET",
          r#"llhttp test/request/invalid.md "ICE protocol and GET method"; RFC 9112 §2.3"#,
          "HPE_INVALID_CONSTANT",
          b"GET /music/sweet/music ICE/1.0\r\nHost: example.com\r\n\r\n",
          Refused(400)),
        v("IHTTP/1.0",
          r#"llhttp test/request/invalid.md "ICE protocol, but not really"; RFC 9112 §2.3"#,
          "HPE_INVALID_CONSTANT",
          b"GET /music/sweet/music IHTTP/1.0\r\nHost: example.com\r\n\r\n",
          Refused(400)),
        v("RTSP/1.0 with PUT",
          r#"llhttp test/request/invalid.md "RTSP protocol and PUT method"; RFC 9112 §2.3"#,
          "HPE_INVALID_CONSTANT",
          b"PUT /music/sweet/music RTSP/1.0\r\nHost: example.com\r\n\r\n",
          Refused(400)),
        v("SOURCE with ICE/1.0",
          r#"llhttp test/request/method.md "SOURCE request with ICE"; RFC 9112 §2.3"#,
          "accepted",
          b"SOURCE /music/sweet/music ICE/1.0\r\nHost: example.com\r\n\r\n",
          Refused(400)),
        v("OPTIONS with RTSP/1.0",
          r#"llhttp test/request/method.md "OPTIONS request with RTSP"; RFC 9112 §2.3"#,
          "accepted",
          b"OPTIONS /music/sweet/music RTSP/1.0\r\nHost: example.com\r\n\r\n",
          Refused(400)),
        v("ANNOUNCE with RTSP/1.0",
          r#"llhttp test/request/method.md "ANNOUNCE request with RTSP"; RFC 9112 §2.3"#,
          "accepted",
          b"ANNOUNCE /music/sweet/music RTSP/1.0\r\nHost: example.com\r\n\r\n",
          Refused(400)),
        v("unknown method MKCOLA",
          r#"llhttp test/request/invalid.md "Invalid method"; RFC 9110 §9.1 (method = token)"#,
          "HPE_INVALID_METHOD",
          b"MKCOLA /echo?format=raw HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
          echoed(b"abc")),
        v("ANNOUNCE with HTTP/1.0",
          r#"llhttp test/request/invalid.md "HTTP protocol and ANNOUNCE method"; RFC 9110 §9.1"#,
          "HPE_INVALID_CONSTANT",
          b"ANNOUNCE /echo?format=raw HTTP/1.0\r\nHost: example.com\r\nConnection: keep-alive\r\n\r\n",
          echoed(b"")),
        v("HEAD",
          r#"llhttp test/request/sample.md "Request with method starting with `H`"; RFC 9110 §9.3.2"#,
          "accepted",
          b"HEAD /url HTTP/1.1\r\nHost: x\r\n\r\n",
          served(404)),
        v("HTTP/1.0 with Host, made persistent",
          r#"llhttp test/request/sample.md "Apache bench GET"; RFC 9112 §9.3"#,
          "accepted",
          b"GET /test HTTP/1.0\r\nHost: 0.0.0.0:5000\r\nUser-Agent: ApacheBench/2.3\r\nAccept: */*\r\nConnection: keep-alive\r\n\r\n",
          served(404)),

        // ---- Host (RFC 9112 §3.2, RFC 9110 §7.2) ----
        v("HTTP/1.1 without Host (corpus bytes)",
          r#"llhttp test/request/transfer-encoding.md "Parsing and setting flag"; RFC 9112 §3.2 (MUST 400)"#,
          "accepted",
          b"PUT /url HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
          Refused(400)),
        v("HTTP/1.1 without headers",
          r#"llhttp test/request/sample.md "No headers and no body"; RFC 9112 §3.2 (MUST 400)"#,
          "accepted",
          b"GET /get_no_headers_no_body/world HTTP/1.1\r\n\r\n",
          Refused(400)),
        v("absolute-form without Host",
          r#"llhttp test/request/uri.md "Host terminated by a query string"; RFC 9112 §3.2 (MUST 400)"#,
          "accepted",
          b"GET http://hypnotoad.org?hail=all HTTP/1.1\r\n\r\n\r\n",
          Refused(400)),
        v("Host with = in the reg-name (curl)",
          r#"llhttp test/request/sample.md "curl GET"; RFC 3986 §3.2.2 (sub-delims)"#,
          "accepted",
          b"GET /test HTTP/1.1\r\nUser-Agent: curl/7.18.0 (i486-pc-linux-gnu) libcurl/7.18.0 OpenSSL/0.9.8g zlib/1.2.3.3 libidn/1.1\r\nHost: 0.0.0.0=5000\r\nAccept: */*\r\n\r\n",
          served(404)),
        v("Host with = in the reg-name (Firefox)",
          r#"llhttp test/request/sample.md "Firefox GET"; RFC 3986 §3.2.2"#,
          "accepted",
          b"GET /favicon.ico HTTP/1.1\r\nHost: 0.0.0.0=5000\r\nUser-Agent: Mozilla/5.0 (X11; U; Linux i686; en-US; rv:1.9) Gecko/2008061015 Firefox/3.0\r\nAccept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\nAccept-Language: en-us,en;q=0.5\r\nAccept-Encoding: gzip,deflate\r\nAccept-Charset: ISO-8859-1,utf-8;q=0.7,*;q=0.7\r\nKeep-Alive: 300\r\nConnection: keep-alive\r\n\r\n",
          served(404)),
        v("two identical Host lines",
          "RFC 9112 §3.2 (MUST 400)",
          NOT_IN_CORPUS,
          b"GET /end-string/2 HTTP/1.1\r\nHost: x\r\nhost: x\r\n\r\n",
          Refused(400)),
        v("two different Host lines",
          "RFC 9112 §3.2 (MUST 400)",
          NOT_IN_CORPUS,
          b"GET /end-string/2 HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
          Refused(400)),
        v("Host with SP",
          "RFC 9112 §3.2 (invalid Host: MUST 400), RFC 3986 §3.2.2",
          NOT_IN_CORPUS,
          b"GET /end-string/2 HTTP/1.1\r\nHost: a b\r\n\r\n",
          Refused(400)),
        v("Host with a path",
          "RFC 9112 §3.2, RFC 9110 §7.2",
          NOT_IN_CORPUS,
          b"GET /end-string/2 HTTP/1.1\r\nHost: a/b\r\n\r\n",
          Refused(400)),
        v("Host with userinfo",
          "RFC 9112 §3.2, RFC 9110 §7.2",
          NOT_IN_CORPUS,
          b"GET /end-string/2 HTTP/1.1\r\nHost: u@a\r\n\r\n",
          Refused(400)),
        v("Host with a non-numeric port",
          "RFC 9112 §3.2, RFC 3986 §3.2.3",
          NOT_IN_CORPUS,
          b"GET /end-string/2 HTTP/1.1\r\nHost: a:http\r\n\r\n",
          Refused(400)),
        v("Host empty",
          "RFC 9112 §3.2 (empty when the target has no authority)",
          NOT_IN_CORPUS,
          b"GET /end-string/2 HTTP/1.1\r\nHost:\r\n\r\n",
          served(200)),
        v("Host IPv6 literal with port",
          "RFC 3986 §3.2.2",
          NOT_IN_CORPUS,
          b"GET /end-string/2 HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n",
          served(200)),
        v("HTTP/1.0 without Host",
          "RFC 9112 §3.2 (HTTP/1.1 only)",
          NOT_IN_CORPUS,
          b"POST /echo?format=raw HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\nabc",
          echoed(b"abc")),

        // ---- head syntax: line ends, obs-fold, whitespace, control bytes (RFC 9112 §2.2, §5) ----
        v("OWS of HTAB and SP before a value",
          r#"llhttp test/request/sample.md "Simple request"; RFC 9112 §5.1"#,
          "accepted",
          b"OPTIONS /url HTTP/1.1\r\nHost: x\r\nHeader1: Value1\r\nHeader2:\t Value2\r\n\r\n",
          served(404)),
        v("no OWS after the colon",
          r#"llhttp test/request/sample.md "DUMBPACK"; RFC 9112 §5.1"#,
          "accepted",
          b"GET /dumbpack HTTP/1.1\r\nHost: x\r\naaaaaaaaaaaaa:++++++++++\r\n\r\n",
          served(404)),
        v("CRLF before the request line",
          r#"llhttp test/request/sample.md "Prefix newline"; RFC 9112 §2.2"#,
          "accepted",
          b"\r\nGET /test HTTP/1.1\r\nHost: x\r\n\r\n",
          served(404)),
        v("obs-text (UTF-8) in a value",
          r#"llhttp test/request/sample.md "Extended Characters"; RFC 9110 §5.5"#,
          "accepted",
          b"GET / HTTP/1.1\r\nHost: x\r\nTest: D\xc3\xbcsseldorf\r\n\r\n",
          served(200)),
        v("obs-text 0xFF in a value",
          r#"llhttp test/request/sample.md "255 ASCII in header value"; RFC 9110 §5.5"#,
          "accepted (sent as UTF-8 c3 bf)",
          b"OPTIONS /url HTTP/1.1\r\nHost: x\r\nHeader1: Value1\r\nHeader2: \xffValue2\r\n\r\n",
          served(404)),
        v("bare CR ending the request line",
          r#"llhttp test/request/sample.md "No LF after CR"; RFC 9112 §2.2"#,
          "HPE_STRICT",
          b"GET / HTTP/1.1\rLine: 1\r\nHost: x\r\n\r\n",
          Refused(400)),
        v("bare LF everywhere, chunk lines included",
          r#"llhttp test/request/invalid.md "Only LFs present"; RFC 9112 §2.2 (head MAY), §7.1 (chunk lines: CRLF)"#,
          "HPE_INVALID_VERSION",
          b"POST / HTTP/1.1\nHost: x\nTransfer-Encoding: chunked\nTrailer: Baz\r\nFoo: abc\nBar: def\n\n1\nA\n1;abc\nB\n1;def=ghi\nC\n1;jkl=\"mno\"\nD\n0\n\nBaz: ghi\n\n\\",
          Refused(400)),
        v("bare LF everywhere (lenient corpus variant)",
          r#"llhttp test/request/invalid.md "Only LFs present (lenient)"; RFC 9112 §7.1"#,
          "accepted (request-lenient-all)",
          b"POST / HTTP/1.1\nHost: x\nTransfer-Encoding: chunked\nTrailer: Baz\r\nFoo: abc\nBar: def\n\n1\nA\n1;abc\nB\n1;def=ghi\nC\n1;jkl=\"mno\"\nD\n0\n\nBaz: ghi\n\n",
          Refused(400)),
        v("bare LF in the head revealing TE",
          r#"llhttp test/request/invalid.md "Headers separated by LF"; RFC 9112 §2.2 (MAY accept bare LF)"#,
          "HPE_CR_EXPECTED",
          b"POST /echo?format=raw HTTP/1.1\r\nHost: localhost:5000\r\nx:x\nTransfer-Encoding: chunked\r\n\r\n1\r\nA\r\n0\r\n\r\n",
          echoed(b"A")),
        v("bare LF after an empty value revealing TE",
          r#"llhttp test/request/invalid.md "Empty headers separated by LF"; RFC 9112 §2.2 (MAY accept bare LF)"#,
          "HPE_INVALID_HEADER_TOKEN",
          b"POST /echo?format=raw HTTP/1.1\r\nHost: localhost:5000\r\nx:\nTransfer-Encoding: chunked\r\n\r\n1\r\nA\r\n0\r\n\r\n",
          echoed(b"A")),
        v("bare LF in the head revealing CL",
          r#"llhttp test/request/invalid.md "Missing CR between headers"; RFC 9112 §2.2 (MAY accept bare LF)"#,
          "HPE_CR_EXPECTED",
          b"POST /echo?format=raw HTTP/1.1\r\nHost: localhost\r\nDummy: x\nContent-Length: 23\r\n\r\nGET / HTTP/1.1\r\nDummy: ",
          echoed(b"GET / HTTP/1.1\r\nDummy: ")),
        v("obs-fold with bare LF",
          r#"llhttp test/request/sample.md "Line folding in header value with LF"; RFC 9112 §5.2"#,
          "HPE_CR_EXPECTED",
          b"GET / HTTP/1.1\r\nHost: x\r\nLine1:   abc\n\tdef\n ghi\n\t\tjkl\n  mno \n\t \tqrs\nLine2: \t line2\t\nLine3:\n line3\nLine4: \n \nConnection:\n close\n\n",
          Refused(400)),
        v("obs-fold with CRLF",
          r#"llhttp test/request/sample.md "Line folding in header value with CRLF"; RFC 9112 §5.2"#,
          "accepted (request-lenient-headers)",
          b"GET / HTTP/1.1\r\nHost: x\r\nLine1:   abc\r\n\tdef\r\n ghi\r\n\t\tjkl\r\n  mno \r\n\t \tqrs\r\nLine2: \t line2\t\r\nLine3:\r\n line3\r\nLine4: \r\n \r\nConnection:\r\n close\r\n\r\n",
          Refused(400)),
        v("certificate in obs-folded lines",
          r#"llhttp test/request/sample.md "X-SSL-Nonsense"; RFC 9112 §5.2"#,
          "accepted (request-lenient-headers)",
          X_SSL_NONSENSE,
          Refused(400)),
        v("SP-led line hiding CL and a request",
          r#"llhttp test/request/invalid.md "Spaces before headers"; RFC 9112 §5.2, §11.2"#,
          "HPE_INVALID_HEADER_TOKEN",
          b"POST /hello HTTP/1.1\r\nHost: localhost\r\nFoo: bar\r\n Content-Length: 38\r\n\r\nGET /bye HTTP/1.1\r\nHost: localhost\r\n\r\n",
          Refused(400)),
        v("SP after the request line",
          r#"llhttp test/request/invalid.md "Invalid space after start line"; RFC 9112 §2.2"#,
          "HPE_UNEXPECTED_SPACE",
          b"GET / HTTP/1.1\r\n Host: foo\r\nHost: x\r\n\r\n",
          Refused(400)),
        v("SP after the request line (relaxed corpus variant)",
          r#"llhttp test/request/lenient-header-value-relaxed.md "Space after start line must still fail"; RFC 9112 §2.2"#,
          "HPE_UNEXPECTED_SPACE (request-lenient-header-value-relaxed)",
          b"GET /url HTTP/1.1\r\n Header1: value\r\nHost: x\r\n\r\n",
          Refused(400)),
        v("field lines separated by bare CR",
          r#"llhttp test/request/invalid.md "Headers separated by CR"; RFC 9112 §2.2"#,
          "HPE_LF_EXPECTED",
          b"GET / HTTP/1.1\r\nHost: x\r\nFoo: 1\rBar: 2\r\n\r\n",
          Refused(400)),
        v("bare CR inside a value",
          r#"llhttp test/request/connection.md "Not treating `\r` as `-`"; RFC 9112 §2.2, RFC 9110 §5.5"#,
          "HPE_LF_EXPECTED",
          b"PUT /url HTTP/1.1\r\nHost: x\r\nConnection: keep\ralive\r\n\r\n",
          Refused(400)),
        v("bare CR after an empty value revealing TE",
          r#"llhttp test/request/invalid.md "Empty headers separated by CR"; RFC 9112 §2.2"#,
          "HPE_STRICT",
          b"POST / HTTP/1.1\r\nConnection: Close\r\nHost: localhost:5000\r\nx:\rTransfer-Encoding: chunked\r\n\r\n1\r\nA\r\n0\r\n\r\n",
          Refused(400)),
        v("head ended by CRLF CR, hidden request",
          r#"llhttp test/request/invalid.md "Headers separated by dummy characters"; RFC 9112 §2.2"#,
          "HPE_STRICT",
          b"GET / HTTP/1.1\r\nConnection: close\r\nHost: a\r\n\rZGET /evil: HTTP/1.1\r\nHost: a\r\n\r\n",
          Refused(400)),
        v("head ended by CRLF CR before the body",
          r#"llhttp test/request/content-length.md "Missing CRLF-CRLF before body"; RFC 9112 §2.2"#,
          "HPE_STRICT",
          b"PUT /url HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\rabc",
          Refused(400)),
        v("form feed as a value",
          r#"llhttp test/request/lenient-headers.md "Header value"; RFC 9110 §5.5"#,
          "HPE_INVALID_HEADER_TOKEN",
          b"GET /url HTTP/1.1\r\nHost: x\r\nHeader1: \x0c\r\n\r\n\r\n",
          Refused(400)),
        v("form feed inside a value",
          r#"llhttp test/request/lenient-header-value-relaxed.md "Control char in header value (strict)"; RFC 9110 §5.5"#,
          "HPE_INVALID_HEADER_TOKEN",
          b"GET /url HTTP/1.1\r\nHost: x\r\nHeader1: hello\x0cworld\r\n\r\n",
          Refused(400)),
        v("Connection name with SP before the colon",
          r#"llhttp test/request/connection.md "Invalid whitespace token with `Connection` header field"; RFC 9112 §5.1 (MUST 400)"#,
          "HPE_INVALID_HEADER_TOKEN",
          b"PUT /url HTTP/1.1\r\nHost: x\r\nConnection : upgrade\r\nContent-Length: 4\r\nUpgrade: ws\r\n\r\nabcdefgh",
          Refused(400)),
        v("bare CR inside a field name",
          r#"llhttp test/request/content-length.md "`Content-Length` with CR instead of dash"; RFC 9110 §5.1"#,
          "HPE_INVALID_HEADER_TOKEN",
          b"PUT /url HTTP/1.1\r\nHost: x\r\nContent\rLength: 003\r\n\r\nabc",
          Refused(400)),
        v("@ in a field name",
          r#"llhttp test/request/invalid.md "Invalid header token #1"; RFC 9110 §5.1"#,
          "HPE_INVALID_HEADER_TOKEN",
          b"GET / HTTP/1.1\r\nHost: x\r\nFo@: Failure\r\n\r\n",
          Refused(400)),
        v("0x01 and HTAB in a field name",
          r#"llhttp test/request/invalid.md "Invalid header token #2"; RFC 9110 §5.1"#,
          "HPE_INVALID_HEADER_TOKEN",
          b"GET / HTTP/1.1\r\nHost: x\r\nFoo\x01\test: Bar\r\n\r\n",
          Refused(400)),
        v("empty field name",
          r#"llhttp test/request/invalid.md "Invalid header token #3"; RFC 9110 §5.1"#,
          "HPE_INVALID_HEADER_TOKEN",
          b"GET / HTTP/1.1\r\nHost: x\r\n: Bar\r\n\r\n",
          Refused(400)),
        v("field name alone, value folded below",
          r#"llhttp test/request/invalid.md "Illegal header field name line folding"; RFC 9112 §5.1, §5.2"#,
          "HPE_INVALID_HEADER_TOKEN",
          b"GET / HTTP/1.1\r\nHost: x\r\nname\r\n : value\r\n\r\n",
          Refused(400)),
        v("Connection name broken by CR, ESC, obs-text",
          r#"llhttp test/request/invalid.md "Corrupted Connection header"; RFC 9110 §5.1, RFC 9112 §2.2"#,
          "HPE_INVALID_HEADER_TOKEN",
          b"GET / HTTP/1.1\r\nHost: www.example.com\r\nConnection\r\x1b5\xc3\x95eep-Alive\r\nAccept-Encoding: gzip\r\n\r\n",
          Refused(400)),
        v("field name broken by CR, ESC, obs-text",
          r#"llhttp test/request/invalid.md "Corrupted header name"; RFC 9110 §5.1, RFC 9112 §2.2"#,
          "HPE_INVALID_HEADER_TOKEN",
          b"GET / HTTP/1.1\r\nHost: www.example.com\r\nX-Some-Header\r\x1b5\xc3\x95eep-Alive\r\nAccept-Encoding: gzip\r\n\r\n",
          Refused(400)),
        v("NUL in a value",
          "RFC 9110 §5.5",
          "not in corpus (harness cannot send NUL)",
          b"GET /end-string/2 HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n",
          Refused(400)),
        v("NUL in a field name",
          "RFC 9110 §5.1",
          "not in corpus (harness cannot send NUL)",
          b"GET /end-string/2 HTTP/1.1\r\nHost: x\r\nX\0A: v\r\n\r\n",
          Refused(400)),
        v("NUL in the target",
          "RFC 9112 §3.2",
          "not in corpus (harness cannot send NUL)",
          b"GET /end-string/2\0 HTTP/1.1\r\nHost: x\r\n\r\n",
          Refused(400)),
        v("NUL in the method",
          "RFC 9110 §9.1 (token)",
          "not in corpus (harness cannot send NUL)",
          b"G\0T /end-string/2 HTTP/1.1\r\nHost: x\r\n\r\n",
          Refused(400)),
        v("0x01 in a value",
          "RFC 9110 §5.5",
          NOT_IN_CORPUS,
          b"GET /end-string/2 HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n",
          Refused(400)),
        v("DEL in a value",
          "RFC 9110 §5.5",
          NOT_IN_CORPUS,
          b"GET /end-string/2 HTTP/1.1\r\nHost: x\r\nX-A: a\x7fb\r\n\r\n",
          Refused(400)),
        v("bare CR in the target",
          "RFC 9112 §2.2, §3",
          NOT_IN_CORPUS,
          b"GET /end-string/2\rx HTTP/1.1\r\nHost: x\r\n\r\n",
          Refused(400)),

        // ---- message boundaries (RFC 9112 §6.3, §9) ----
        v("empty lines between pipelined requests",
          r#"llhttp test/request/connection.md "CRLF between requests, implicit `keep-alive`"; RFC 9112 §2.2"#,
          "accepted",
          b"POST /echo?format=raw HTTP/1.1\r\nHost: www.example.com\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 4\r\n\r\nq=42\r\n\r\n",
          echoed(b"q=42")),
        v("Connection: close, a request behind it",
          r#"llhttp test/request/connection.md "CRLF between requests, explicit `close`"; RFC 9112 §9.6"#,
          "HPE_CLOSED_CONNECTION",
          b"POST /echo?format=raw HTTP/1.1\r\nHost: www.example.com\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 4\r\nConnection: close\r\n\r\nq=42\r\n\r\nGET / HTTP/1.1",
          Refused(200)),
        v("HTTP/1.0 without keep-alive, a request behind it",
          r#"llhttp test/request/connection.md "No restart when keep-alive is off (1.0)"; RFC 9112 §9.3"#,
          "HPE_CLOSED_CONNECTION",
          b"PUT /url HTTP/1.0\r\n\r\nPUT /url HTTP/1.1\r\nHost: x\r\n\r\n",
          Refused(404)),
        v("Upgrade ignored, CL body read",
          r#"llhttp test/request/connection.md "Emitting part of body and pausing"; RFC 9110 §7.8"#,
          "HPE_PAUSED_UPGRADE (pause)",
          b"PUT /echo?format=raw HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nContent-Length: 4\r\nUpgrade: ws\r\n\r\nabcd",
          echoed(b"abcd")),
        v("Upgrade: HTTP/2.0 ignored, CL body read",
          r#"llhttp test/request/connection.md "Upgrade POST request"; RFC 9110 §7.8"#,
          "HPE_PAUSED_UPGRADE (pause)",
          b"POST /echo?format=raw HTTP/1.1\r\nHost: example.com\r\nConnection: Upgrade\r\nUpgrade: HTTP/2.0\r\nContent-Length: 15\r\n\r\nsweet post body",
          echoed(b"sweet post body")),
        v("WebSocket upgrade ignored",
          r#"llhttp test/request/connection.md "Upgrade GET request"; RFC 9110 §7.8"#,
          "HPE_PAUSED_UPGRADE (pause)",
          b"GET /demo HTTP/1.1\r\nHost: example.com\r\nConnection: Upgrade\r\nSec-WebSocket-Key2: 12998 5 Y3 1  .P00\r\nSec-WebSocket-Protocol: sample\r\nUpgrade: WebSocket\r\nSec-WebSocket-Key1: 4 @1  46546xW%0l 1 5\r\nOrigin: http://example.com\r\n\r\n",
          served(404)),
        v("Connection: close plus tokens",
          r#"llhttp test/request/connection.md "Sample"; RFC 9112 §9.6"#,
          "accepted",
          b"PUT /url HTTP/1.1\r\nHost: x\r\nConnection: close, token, upgrade, token, keep-alive\r\n\r\n",
          Refused(404)),
    ]
}

/// Whether `bytes` is a HEAD request (its response has no body).
fn is_head(bytes: &[u8]) -> bool {
    let start = bytes
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(bytes.len());
    bytes[start..].starts_with(b"HEAD ")
}

fn show(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

/// Sends `vector` and `NEXT` on a new connection and checks the verdict.
fn run(server: &Running<Site>, vector: &Vector) -> Result<(), String> {
    let name = vector.name;
    let mut s = connect(server);
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let input = [&vector.bytes[..], NEXT].concat();
    // Written from another thread: a refusal may come (and the server stop
    // reading) before all of a long vector is sent, and a failed write is
    // then expected, not an error.
    let mut w = s.try_clone().unwrap();
    let writer = thread::spawn(move || {
        let _ = w.write_all(&input);
    });
    let result = check(&mut s, vector);
    let _ = s.shutdown(std::net::Shutdown::Both);
    let _ = writer.join();
    result.map_err(|e| format!("{name}: {e}"))
}

/// A response in one line, for a failure's message: status, `Connection`,
/// the body's start.
fn summary(r: &Raw) -> String {
    format!(
        "{} {:?} {:.120}",
        r.status,
        r.header("connection"),
        show(&r.body)
    )
}

fn check(s: &mut TcpStream, vector: &Vector) -> Result<(), String> {
    let mut buf = Vec::new();
    let r = read_response(s, &mut buf, is_head(&vector.bytes)).map_err(|e| e.to_string())?;
    let got = summary(&r);
    match vector.expect {
        Served { status, body } => {
            if r.status != status {
                return Err(format!("expected {status}, got {got}"));
            }
            if r.header("connection") == Some("close") {
                return Err(format!("expected the connection kept, got {got}"));
            }
            if let Some(body) = body {
                if r.body != body {
                    return Err(format!(
                        "expected the body {:?}, got {:?}",
                        show(body),
                        show(&r.body)
                    ));
                }
            }
            let next = read_response(s, &mut buf, false)
                .map_err(|e| format!("pipelined request after {got}: {e}"))?;
            if (next.status, &next.body[..]) != (200, b"aa") {
                return Err(format!(
                    "pipelined request answered {} {:?}",
                    next.status,
                    show(&next.body)
                ));
            }
        }
        Refused(status) => {
            if r.status != status {
                return Err(format!("expected {status} and a close, got {got}"));
            }
            if r.header("connection") != Some("close") {
                return Err(format!("expected Connection: close, got {got}"));
            }
            let mut rest = Vec::new();
            match s.read_to_end(&mut rest) {
                Ok(_) if buf.is_empty() && rest.is_empty() => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset && buf.is_empty() => {}
                other => {
                    buf.extend_from_slice(&rest);
                    return Err(format!(
                        "after {got}: not closed, or more answered: {:?} {:.300}",
                        other.map(drop),
                        show(&buf)
                    ));
                }
            }
        }
    }
    Ok(())
}

#[test]
fn every_framing_vector_gets_its_verdict() {
    let vectors = vectors();
    assert!(vectors.len() >= 118, "{} vectors", vectors.len());
    let server = start(Strategy::Direct);
    let failures: Vec<String> = vectors
        .iter()
        .filter_map(|vector| run(&server, vector).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} vectors failed:\n{}",
        failures.len(),
        vectors.len(),
        failures.join("\n")
    );
}

/// Where an input of `len` bytes is split in two: at every byte, except
/// that inputs over 4 KiB (the 16 KiB extension and trailer vectors) are
/// split at every byte of their first and last KiB and every 61st byte
/// between, which keeps the test to seconds in a debug build.
fn cuts(len: usize) -> Vec<usize> {
    if len <= 4096 {
        return (0..=len).collect();
    }
    (0..=len)
        .filter(|&c| c <= 1024 || c >= len - 1024 || c % 61 == 0)
        .collect()
}

/// Sent behind every vector in memory, to the trivial service: answered
/// `ab`.
const NEXT_TRIVIAL: &[u8] = b"GET /n/2 HTTP/1.1\r\nHost: x\r\n\r\n";

/// Checks the verdict on what a session of the trivial service wrote for
/// `vector` and [`NEXT_TRIVIAL`], and whether it `closed`. The core's part
/// of the verdict: the connection kept, the pipelined request answered,
/// the raw echo's body, a refusal's status, `Connection: close` and
/// nothing after it. A served vector's status is its route's (the demo's),
/// not checked here.
fn check_in_memory(out: &[u8], closed: bool, vector: &Vector) -> Result<(), String> {
    let mut buf = out.to_vec();
    let none = &mut &[][..];
    let r = read_response(none, &mut buf, is_head(&vector.bytes)).map_err(|e| e.to_string())?;
    let got = summary(&r);
    match vector.expect {
        Served { status, body } => {
            if closed || r.header("connection") == Some("close") {
                return Err(format!("expected the connection kept, got {got}"));
            }
            if let Some(body) = body {
                if (r.status, &r.body[..]) != (status, body) {
                    return Err(format!("expected {status} {:?}, got {got}", show(body)));
                }
            }
            let next = read_response(none, &mut buf, false)
                .map_err(|e| format!("pipelined request after {got}: {e}"))?;
            if (next.status, &next.body[..], &buf[..]) != (200, b"ab", b"") {
                return Err(format!(
                    "pipelined request answered {} {:?}, then {:?}",
                    next.status,
                    show(&next.body),
                    show(&buf)
                ));
            }
        }
        Refused(status) => {
            if r.status != status
                || r.header("connection") != Some("close")
                || !closed
                || !buf.is_empty()
            {
                return Err(format!(
                    "expected {status} and a close, got {got}, closed: {closed}, then {:?}",
                    show(&buf)
                ));
            }
        }
    }
    Ok(())
}

/// The core alone, on the trivial service (`common/trivial.rs`): every
/// vector gets the core's part of its verdict, however its bytes are
/// split into reads.
#[test]
fn every_framing_vector_is_answered_the_same_however_split() {
    let app = trivial();
    let mut failures = Vec::new();
    for vector in vectors() {
        let input = [&vector.bytes[..], NEXT_TRIVIAL].concat();
        let (whole, closed) = serve(&app, &[&input]);
        if let Err(e) = check_in_memory(&whole, closed, &vector) {
            failures.push(format!("{}: {e}", vector.name));
            continue;
        }
        let expect = (undated(&whole), closed);
        let differs = |parts: &[&[u8]]| {
            let (out, closed) = serve(&app, parts);
            (undated(&out), closed) != expect
        };
        if let Some(cut) = cuts(input.len()).into_iter().find(|&cut| {
            let (a, b) = input.split_at(cut);
            differs(&[a, b])
        }) {
            failures.push(format!("{}: split at {cut}", vector.name));
            continue;
        }
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        if differs(&bytes) {
            failures.push(format!("{}: byte by byte", vector.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn verdict_text(v: Verdict) -> String {
    match v {
        Served { status, body: None } => format!("served {status}"),
        Served {
            status,
            body: Some(b),
        } => {
            let shown = show(b);
            if b.is_empty() {
                format!("served {status}, empty body")
            } else if shown.len() > 40 {
                format!("served {status}, body of {} bytes", b.len())
            } else {
                format!("served {status}, body `{shown}`")
            }
        }
        Refused(status) => format!("refused {status}, closed"),
    }
}

#[test]
fn vector_table_markdown() {
    let vectors = vectors();
    let mut names: Vec<&str> = vectors.iter().map(|v| v.name).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(names.len(), before, "vector names are unique");
    let Some(path) = std::env::var_os("FRAMING_TABLE") else {
        return;
    };
    let cell = |s: &str| s.replace('|', "\\|");
    let mut md =
        String::from("| # | vector | source | llhttp | unflat verdict |\n|---|---|---|---|---|\n");
    for (i, v) in vectors.iter().enumerate() {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            i + 1,
            cell(v.name),
            cell(v.source),
            cell(v.llhttp),
            verdict_text(v.expect)
        ));
    }
    std::fs::write(path, md).unwrap();
}

/// Sent behind every vector in the fuzz seeds, to the trivial service the
/// session target serves: a streamed body, so that the fuzzer starts from
/// chunked responses too.
const NEXT_FUZZ: &[u8] = b"GET /n/5?form=twobyte&chunks=2 HTTP/1.1\r\nHost: x\r\n\r\n";

/// With `FRAMING_CORPUS=<dir>`, writes every vector (and [`NEXT_FUZZ`]
/// behind it) as a seed for the session fuzz target, in its input format:
/// the first byte is the read size.
#[test]
fn vectors_as_fuzz_seeds() {
    let Some(dir) = std::env::var_os("FRAMING_CORPUS") else {
        return;
    };
    std::fs::create_dir_all(&dir).unwrap();
    for (i, v) in vectors().iter().enumerate() {
        for read_size in [7u8, 255] {
            let mut seed = vec![read_size];
            seed.extend_from_slice(&v.bytes);
            seed.extend_from_slice(NEXT_FUZZ);
            let path = std::path::Path::new(&dir).join(format!("vector-{i:03}-{read_size}"));
            std::fs::write(path, seed).unwrap();
        }
    }
}
