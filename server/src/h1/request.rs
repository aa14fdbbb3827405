//! The request head, without IO: parsed by httparse and checked against
//! RFC 9112; the body's framing is read here and decoded in
//! [`crate::decode`].
//!
//! [`parse_head`] answers like httparse does — complete, partial, or a
//! rejection — and every rejection names the status to send and a short
//! reason; the connection is always closed after one, because after a
//! malformed head the framing of whatever follows cannot be trusted.

use std::mem::MaybeUninit;
use std::str;

use unflat::head::{Framing, Status};

/// Most header fields a request may have, whatever `--max-fields` says
/// (they are parsed into an array on the stack).
pub const FIELDS_CAP: usize = 256;

/// Limits that apply to a request head.
#[derive(Clone, Copy, Debug)]
pub struct HeadLimits {
    /// Bytes in the whole head.
    pub head: usize,
    /// Bytes in the request line.
    pub request_line: usize,
    /// Header fields.
    pub fields: usize,
}

/// A request refused before it was served: the status, a plain-text reason,
/// and always a close.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reject {
    /// The status to answer with.
    pub status: Status,
    /// Why, in a few words, sent as the body.
    pub reason: &'static str,
}

pub(crate) const fn reject(status: Status, reason: &'static str) -> Reject {
    Reject { status, reason }
}

/// A parsed and checked request head, borrowing the input.
#[derive(Debug)]
pub struct RequestHead<'b> {
    /// The method token.
    pub method: &'b str,
    /// The request target as sent.
    pub target: &'b str,
    /// The target's path (origin or absolute form), without the query.
    pub path: &'b str,
    /// The target's query, if any.
    pub query: Option<&'b str>,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub version: u8,
    /// The header fields in order, as received.
    pub fields: &'b [httparse::Header<'b>],
    /// Bytes the head took, from the start of the input (leading empty
    /// lines included).
    pub len: usize,
    /// How the body is delimited.
    pub framing: Framing,
    /// Whether the connection stays open after the response.
    pub keep_alive: bool,
    /// `Expect: 100-continue` on an HTTP/1.1 request.
    pub expect_continue: bool,
}

impl<'b> RequestHead<'b> {
    /// True for `HEAD`.
    pub fn is_head(&self) -> bool {
        self.method == "HEAD"
    }
}

/// What follows `http://` or `https://` (in any case) at the start of an
/// absolute-form target.
fn after_scheme(target: &str) -> Option<&str> {
    // Compared as bytes: the target may hold any UTF-8, and a scheme that
    // matches ends with an ASCII '/', so slicing after it is safe.
    ["http://", "https://"].iter().find_map(|scheme| {
        let head = target.as_bytes().get(..scheme.len())?;
        head.eq_ignore_ascii_case(scheme.as_bytes())
            .then(|| &target[scheme.len()..])
    })
}

/// What [`parse_head`] found.
#[derive(Debug)]
pub enum Parsed<'b> {
    /// A whole head, checked.
    Complete(RequestHead<'b>),
    /// More bytes are needed.
    Partial,
    /// The head is refused.
    Rejected(Reject),
    /// The request line says `HTTP/1.x` with x above 1, whose minor digit
    /// is at this offset: such a request is processed as HTTP/1.1 (RFC 9112
    /// §2.3). httparse reads 1.0 and 1.1 only, so the caller writes `1`
    /// over the digit and parses again.
    NewerMinor(usize),
}

/// Parses and checks the request head at the start of `input`, using
/// `fields` for httparse's header array.
pub fn parse_head<'b>(
    input: &'b [u8],
    fields: &'b mut [MaybeUninit<httparse::Header<'b>>],
    limits: HeadLimits,
) -> Parsed<'b> {
    let max_fields = limits.fields.min(fields.len());
    let mut req = httparse::Request::new(&mut []);
    let len = match req.parse_with_uninit_headers(input, &mut fields[..max_fields]) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => {
            return match over_limits(input, limits) {
                Some(r) => Parsed::Rejected(r),
                None => Parsed::Partial,
            }
        }
        Err(e) => return on_error(e, input, limits),
    };
    let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version) else {
        return Parsed::Rejected(reject(Status::BAD_REQUEST, "incomplete request line"));
    };
    // The request line's length from its parts, without a scan: `method SP
    // target SP HTTP/1.x` (httparse allows no other spacing).
    if let Some(r) = line_and_head_limits(method.len() + target.len() + 10, len, limits) {
        return Parsed::Rejected(r);
    }
    let (path, query) = match parse_target(method, target) {
        Ok(parts) => parts,
        Err(r) => return Parsed::Rejected(r),
    };
    let fields: &'b [httparse::Header<'b>] = req.headers;
    match check_fields(fields, version) {
        Ok(checked) => Parsed::Complete(RequestHead {
            method,
            target,
            path,
            query,
            version,
            fields,
            len,
            framing: checked.framing,
            keep_alive: checked.keep_alive,
            expect_continue: checked.expect_continue,
        }),
        Err(r) => Parsed::Rejected(r),
    }
}

/// 414 for a request line over the limit, 431 for a head over it, found by
/// scanning what has arrived of a head.
fn over_limits(head: &[u8], limits: HeadLimits) -> Option<Reject> {
    let line = after_empty_lines(head);
    let line_len = match line.iter().position(|&b| b == b'\n') {
        // Without its line ending, CRLF or bare LF.
        Some(end) => end - usize::from(end > 0 && line[end - 1] == b'\r'),
        None => line.len(),
    };
    line_and_head_limits(line_len, head.len(), limits)
}

/// 414 for a request line of `line_len` bytes (its line ending not
/// counted) over the limit, 431 for a head of `head_len` bytes over it.
fn line_and_head_limits(line_len: usize, head_len: usize, limits: HeadLimits) -> Option<Reject> {
    if line_len > limits.request_line {
        return Some(reject(Status::URI_TOO_LONG, "request line too long"));
    }
    if head_len > limits.head {
        return Some(reject(
            Status::HEADER_FIELDS_TOO_LARGE,
            "request head too large",
        ));
    }
    None
}

/// What an httparse error means: a refusal, or, for a version httparse
/// does not read, either more bytes to wait for or an HTTP/1.x to process
/// as 1.1.
fn on_error<'b>(e: httparse::Error, input: &[u8], limits: HeadLimits) -> Parsed<'b> {
    use httparse::Error as E;
    if let Some(r) = over_limits(input, limits) {
        return Parsed::Rejected(r);
    }
    let r = match e {
        E::TooManyHeaders => reject(Status::HEADER_FIELDS_TOO_LARGE, "too many header fields"),
        // httparse parses HTTP/1.0 and 1.1 only, and may stop at the first
        // digit it does not expect: the verdict waits for the whole line,
        // so that it does not depend on where the bytes were split.
        E::Version => match request_line_version(input) {
            Version::Incomplete => return Parsed::Partial,
            Version::Http {
                major: b'1',
                minor: b'2'..=b'9',
                at,
            } => return Parsed::NewerMinor(at),
            Version::Http { .. } => reject(
                Status::VERSION_NOT_SUPPORTED,
                "only HTTP/1.0 and HTTP/1.1 are supported",
            ),
            Version::Malformed => reject(Status::BAD_REQUEST, "malformed HTTP version"),
        },
        E::HeaderName => reject(Status::BAD_REQUEST, "invalid header field name"),
        E::HeaderValue => reject(Status::BAD_REQUEST, "invalid header field value"),
        E::Token => reject(Status::BAD_REQUEST, "invalid method or request target"),
        // A verdict at the first wrong byte, whatever follows it.
        E::NewLine => reject(
            Status::BAD_REQUEST,
            "invalid line ending, or bytes after the HTTP version",
        ),
        E::Status => reject(Status::BAD_REQUEST, "invalid request line"),
    };
    Parsed::Rejected(r)
}

/// `input` from its request line on: the empty lines a request may begin
/// with (RFC 9112 §2.2) are not part of it.
pub(crate) fn after_empty_lines(input: &[u8]) -> &[u8] {
    let start = input
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(input.len());
    &input[start..]
}

/// The version at the end of a request line.
enum Version {
    /// The line has not ended yet.
    Incomplete,
    /// `HTTP/major.minor`; `at` is the offset of the minor digit.
    Http { major: u8, minor: u8, at: usize },
    /// Anything else.
    Malformed,
}

fn request_line_version(input: &[u8]) -> Version {
    let start = input.len() - after_empty_lines(input).len();
    let Some(end) = input[start..].iter().position(|&b| b == b'\n') else {
        return Version::Incomplete;
    };
    let line = &input[start..start + end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // `method SP target SP version`: a target with a space in it is a
    // malformed request line (400), whatever its last word looks like.
    let mut parts = line.split(|&b| b == b' ');
    let (Some(_), Some(_), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Version::Malformed;
    };
    match *version {
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            Version::Http {
                major,
                minor,
                at: start + line.len() - 1,
            }
        }
        _ => Version::Malformed,
    }
}

/// Checks the request target and splits it into `(path, query)`, in one
/// pass over its bytes.
///
/// The forms of RFC 9112 §3.2: origin-form (`/path?query`) and
/// absolute-form (`http://host/path?query`, no userinfo: RFC 9110 §4.2.4;
/// its path is `/` when empty) for every method, asterisk-form (`*`) for
/// OPTIONS only. A `CONNECT` (authority-form) is refused with 501: this
/// server is no proxy, and the connection is closed so that tunnel bytes
/// behind it are never read as requests. Every byte must be one a URI
/// allows (RFC 3986: no space, no `"`, `\`, `|`, `{`, `}`, `^`, backtick,
/// control or non-ASCII byte, a `%` of the path only before two hex
/// digits: the query's are the routes' to check), and a fragment (`#`) is
/// never part of a target.
fn parse_target<'t>(method: &str, target: &'t str) -> Result<(&'t str, Option<&'t str>), Reject> {
    let bad = |reason| Err(reject(Status::BAD_REQUEST, reason));
    if method == "CONNECT" {
        return if target.contains(':') && valid_host(target.as_bytes()) {
            Err(reject(
                Status::NOT_IMPLEMENTED,
                "CONNECT is not supported: this server is not a proxy",
            ))
        } else {
            bad("a CONNECT target must be host:port")
        };
    }
    // Origin form, what nearly every request has, needs no scheme search.
    let rest = if target.starts_with('/') {
        target
    } else if target == "*" {
        return if method == "OPTIONS" {
            Ok(("*", None))
        } else {
            bad("the asterisk-form target (*) is only for OPTIONS")
        };
    } else if let Some(after) = after_scheme(target) {
        let end = after.find(['/', '?']).unwrap_or(after.len());
        let authority = &after[..end];
        if authority.contains('#') {
            return bad(FRAGMENT);
        }
        if authority.contains('@') {
            return bad("userinfo (user@) is not allowed in a request target");
        }
        if !valid_host(authority.as_bytes()) {
            return bad("invalid authority in an absolute-form target");
        }
        &after[end..]
    } else {
        return bad("the request target must begin with / (or be http://host/… or * for OPTIONS)");
    };
    // The target of every request is checked. Nearly every target holds
    // URI bytes only, no `%`: one tight pass through the table, and the
    // query found by a byte search. Any other byte takes the detailed pass,
    // which says what is wrong.
    let bytes = rest.as_bytes();
    let query_at = if all_in(bytes, &URI_BYTE) {
        bytes.iter().position(|&b| b == b'?')
    } else {
        query_in_escaped(bytes)?
    };
    // Every byte is ASCII now, so slicing anywhere is safe.
    let (path, query) = match query_at {
        Some(q) => (&rest[..q], Some(&rest[q + 1..])),
        None => (rest, None),
    };
    Ok((if path.is_empty() { "/" } else { path }, query))
}

/// Where the query of a target's path and query begins (its `?`), for a
/// target with bytes besides [`URI_BYTE`]'s: each `%` of the path must
/// begin an escape (two hex digits), and no other byte is allowed. A `%`
/// of the query is left to the route that reads it, which refuses a bad
/// escape naming the parameter it is in (`routes.rs`).
fn query_in_escaped(bytes: &[u8]) -> Result<Option<usize>, Reject> {
    let bad = |reason| Err(reject(Status::BAD_REQUEST, reason));
    let mut query_at = None;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'?' if query_at.is_none() => query_at = Some(i),
            b if URI_BYTE[usize::from(b)] => {}
            b'%' if query_at.is_some() => {}
            b'%' => {
                if !begins_escape(bytes, i) {
                    return bad("a % not followed by two hex digits in the request target");
                }
                i += 3;
                continue;
            }
            b'#' => return bad(FRAGMENT),
            _ => return bad("a byte not allowed in a URI in the request target"),
        }
        i += 1;
    }
    Ok(query_at)
}

const FRAGMENT: &str = "a fragment (#) is not allowed in a request target";

/// Whether the `%` at `at` begins an escape: two hex digits follow it
/// (RFC 3986 §2.1). The path's escapes are checked here, the query's by the
/// routes that read it.
pub(crate) fn begins_escape(bytes: &[u8], at: usize) -> bool {
    let hex = |j: usize| bytes.get(j).is_some_and(u8::is_ascii_hexdigit);
    hex(at + 1) && hex(at + 2)
}

/// The bytes a path and query may hold besides `%` (RFC 3986 §3.3, §3.4):
/// unreserved, sub-delims, `:`, `@`, `/` and `?`.
static URI_BYTE: [bool; 256] = alphanumeric_and(b"-._~!$&'()*+,;=:@/?");

struct Checked {
    framing: Framing,
    keep_alive: bool,
    expect_continue: bool,
}

/// The RFC 9112 checks on the fields: framing (§6), Host (RFC 9110 §7.2),
/// Connection (§9.3), Expect (RFC 9110 §10.1.1).
fn check_fields(fields: &[httparse::Header<'_>], version: u8) -> Result<Checked, Reject> {
    let mut length: Option<u64> = None;
    let mut transfer_encoding = false;
    let mut chunked_last = false;
    let mut chunked_count = 0;
    let mut other_coding = false;
    let mut hosts = 0;
    let mut close = false;
    let mut keep_alive_token = false;
    let mut expect_continue = false;
    for f in fields {
        let name = f.name;
        let value = trim(f.value);
        if name.eq_ignore_ascii_case("content-length") {
            // A list of identical values is allowed (§6.3 item 5), anything
            // else is an attempt at smuggling or a mistake.
            for item in value.split(|&b| b == b',') {
                let n = parse_length(trim(item))?;
                if length.is_some_and(|l| l != n) {
                    return Err(reject(
                        Status::BAD_REQUEST,
                        "conflicting Content-Length values",
                    ));
                }
                length = Some(n);
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            if version == 0 {
                return Err(reject(
                    Status::BAD_REQUEST,
                    "Transfer-Encoding in an HTTP/1.0 request",
                ));
            }
            transfer_encoding = true;
            for coding in value
                .split(|&b| b == b',')
                .map(trim)
                .filter(|c| !c.is_empty())
            {
                let chunked = coding.eq_ignore_ascii_case(b"chunked");
                chunked_count += usize::from(chunked);
                other_coding |= !chunked;
                chunked_last = chunked;
            }
        } else if name.eq_ignore_ascii_case("host") {
            hosts += 1;
            if !valid_host(value) {
                return Err(reject(Status::BAD_REQUEST, "invalid Host"));
            }
        } else if name.eq_ignore_ascii_case("connection") {
            for token in value.split(|&b| b == b',').map(trim) {
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive_token |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case("expect") && version == 1 {
            // Expect is only defined for HTTP/1.1 (RFC 9110 §10.1.1).
            if value.eq_ignore_ascii_case(b"100-continue") {
                expect_continue = true;
            } else {
                return Err(reject(
                    Status::EXPECTATION_FAILED,
                    "unsupported expectation",
                ));
            }
        }
    }
    if transfer_encoding && length.is_some() {
        return Err(reject(
            Status::BAD_REQUEST,
            "both Content-Length and Transfer-Encoding",
        ));
    }
    if transfer_encoding && (!chunked_last || chunked_count > 1) {
        // §6.3 item 4: the body length cannot be determined.
        return Err(reject(
            Status::BAD_REQUEST,
            "chunked must be the last transfer coding, once",
        ));
    }
    if other_coding {
        // RFC 9112 §6.1: a coding the server does not understand.
        return Err(reject(
            Status::NOT_IMPLEMENTED,
            "unsupported transfer coding",
        ));
    }
    if version == 1 && hosts != 1 {
        return Err(reject(
            Status::BAD_REQUEST,
            if hosts == 0 {
                "missing Host"
            } else {
                "more than one Host"
            },
        ));
    }
    if hosts > 1 {
        return Err(reject(Status::BAD_REQUEST, "more than one Host"));
    }
    let framing = match (transfer_encoding, length) {
        (true, _) => Framing::Chunked,
        (false, Some(0) | None) => Framing::None,
        (false, Some(n)) => Framing::Length(n),
    };
    let keep_alive = !close && (version == 1 || keep_alive_token);
    Ok(Checked {
        framing,
        keep_alive,
        expect_continue: expect_continue && framing != Framing::None,
    })
}

fn parse_length(v: &[u8]) -> Result<u64, Reject> {
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return Err(reject(Status::BAD_REQUEST, "invalid Content-Length"));
    }
    // Digits only, so the string is ASCII; overflow is an error, not a wrap.
    str::from_utf8(v)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(reject(Status::BAD_REQUEST, "Content-Length out of range"))
}

fn trim(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|&b| b != b' ' && b != b'\t')
        .map_or(start, |e| e + 1);
    &v[start..end]
}

/// `uri-host [ ":" port ]` (RFC 9110 §7.2, RFC 3986 §3.2.2); empty is
/// allowed (RFC 9112 §3.2, for targets without an authority).
fn valid_host(v: &[u8]) -> bool {
    let (host, port) = if v.first() == Some(&b'[') {
        let Some(end) = v.iter().position(|&b| b == b']') else {
            return false;
        };
        let literal = &v[1..end];
        if literal.is_empty()
            || !literal
                .iter()
                .all(|&b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
        {
            return false;
        }
        match &v[end + 1..] {
            [] => return true,
            [b':', port @ ..] => (&v[..0], port),
            _ => return false,
        }
    } else {
        match v.iter().rposition(|&b| b == b':') {
            Some(i) => (&v[..i], &v[i + 1..]),
            None => (v, &v[..0]),
        }
    };
    port.len() <= 5 && port.iter().all(u8::is_ascii_digit) && all_in(host, &REG_NAME)
}

/// Whether every byte of `bytes` is one `table` allows. No early exit, so
/// the loop unrolls: a Host or a target is a few dozen bytes, checked in
/// every request, and nearly always passes.
fn all_in(bytes: &[u8], table: &[bool; 256]) -> bool {
    bytes.iter().fold(true, |ok, &b| ok & table[usize::from(b)])
}

/// The bytes of a reg-name (RFC 3986 §3.2.2): unreserved, sub-delims and
/// `%` (a table: every request's Host is checked byte by byte).
static REG_NAME: [bool; 256] = alphanumeric_and(b"-._~%!$&'()*+,;=");

/// A table of the ASCII letters and digits and the bytes of `allowed`.
const fn alphanumeric_and(allowed: &[u8]) -> [bool; 256] {
    let mut table = [false; 256];
    let mut i = 0;
    while i < allowed.len() {
        table[allowed[i] as usize] = true;
        i += 1;
    }
    let mut b = 0;
    while b < 256 {
        if (b as u8).is_ascii_alphanumeric() {
            table[b] = true;
        }
        b += 1;
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(input: &[u8], request_line: usize) -> Result<bool, Status> {
        let limits = HeadLimits {
            head: 1 << 14,
            request_line,
            fields: 16,
        };
        let mut fields = [MaybeUninit::uninit(); 16];
        match parse_head(input, &mut fields, limits) {
            Parsed::Complete(_) => Ok(true),
            Parsed::Partial => Ok(false),
            Parsed::Rejected(r) => Err(r.status),
            Parsed::NewerMinor(_) => Err(Status::VERSION_NOT_SUPPORTED),
        }
    }

    #[test]
    fn the_request_line_limit_is_the_same_for_a_whole_head_and_a_partial_one() {
        // `GET /aaa… HTTP/1.1` is the target's length + 13 bytes.
        for (target, fits) in [(87, true), (88, false)] {
            let line = format!("GET /{} HTTP/1.1", "a".repeat(target - 1));
            assert_eq!(line.len(), target + 13);
            let whole = format!("{line}\r\nHost: t\r\n\r\n");
            let partial = format!("{line}\r\nHost: t\r\n");
            let bare_lf = format!("{line}\nHost: t\n");
            let expect = |done| {
                if fits {
                    Ok(done)
                } else {
                    Err(Status::URI_TOO_LONG)
                }
            };
            assert_eq!(parse(whole.as_bytes(), 100), expect(true), "{target}");
            assert_eq!(parse(partial.as_bytes(), 100), expect(false), "{target}");
            assert_eq!(parse(bare_lf.as_bytes(), 100), expect(false), "{target}");
        }
    }

    #[test]
    fn targets_split_into_path_and_query() {
        let get = |t| parse_target("GET", t).map_err(|r| r.reason);
        assert_eq!(get("/a/b?x=1&y"), Ok(("/a/b", Some("x=1&y"))));
        assert_eq!(get("/a?b?c"), Ok(("/a", Some("b?c"))));
        assert_eq!(get("/a"), Ok(("/a", None)));
        assert_eq!(get("HTTP://host:80/p?q"), Ok(("/p", Some("q"))));
        assert_eq!(get("https://host"), Ok(("/", None)));
        assert_eq!(get("http://host?q=1"), Ok(("/", Some("q=1"))));
        assert_eq!(get("/%41%7e"), Ok(("/%41%7e", None)));
        // The query's escapes are checked by the route that reads them.
        assert_eq!(get("/a?q=%zz&r=%4"), Ok(("/a", Some("q=%zz&r=%4"))));
        assert_eq!(parse_target("OPTIONS", "*"), Ok(("*", None)));
        // Multi-byte characters where a scheme would end (found by the
        // session fuzz target: slicing at byte 7 used to panic), and
        // anywhere else: not URI bytes.
        assert!(get("httpsܫx").is_err());
        assert!(get("/ééé?q").is_err());
        for bad in [
            "*",
            "a/b",
            "/a#b",
            "/a b",
            "/%4",
            "/%zz",
            "/a|b",
            "http://u@h/",
        ] {
            assert!(get(bad).is_err(), "{bad:?} accepted");
        }
    }
}
