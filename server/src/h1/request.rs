//! The request head, without IO: scanned in one walk (`scan.rs`, httparse's
//! grammar) and checked against
//! RFC 9112 — its target by the URI grammar (`uri.rs`), its fields by the
//! framing, Host, Connection and Expect rules (`fields.rs`).
//!
//! [`parse_head`] answers like httparse does — complete, partial, or a
//! rejection — and every rejection names the status to send and a short
//! reason; the connection is always closed after one, because after a
//! malformed head the framing of whatever follows cannot be trusted.

use std::borrow::Cow;
use std::mem::MaybeUninit;

use unflat::head::{Framing, Status};

use super::fields::check_fields;
use super::query::{pairs, Pair, QueryError};
use super::scan::{scan, Scanned};
use super::uri::parse_target;
use super::{reject, HeadLimits, Reject};

/// A parsed and checked request head, borrowing the input.
#[derive(Debug)]
pub struct RequestHead<'b> {
    /// The method token.
    pub method: &'b str,
    /// The request target as sent.
    pub target: &'b str,
    /// The target's path (origin or absolute form), without the query, as
    /// sent: percent-encoded ([`RequestHead::decoded_path`] decodes it).
    pub path: &'b str,
    /// The target's query as sent, if any ([`RequestHead::query_pairs`]
    /// decodes it).
    pub query: Option<&'b str>,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub version: u8,
    /// The header fields in order, as received ([`RequestHead::fields`]).
    fields: &'b [httparse::Header<'b>],
    /// Bytes the head took, from the start of the input (leading empty
    /// lines included).
    pub len: usize,
    /// How the body is delimited.
    pub framing: Framing,
    /// Whether the client asks to keep the connection open (the session
    /// decides whether it does).
    pub wants_keep_alive: bool,
    /// `Expect: 100-continue` on an HTTP/1.1 request.
    pub expect_continue: bool,
    /// The method is `HEAD`: compared once, asked by the core and the
    /// service alike.
    head_request: bool,
    /// The head's walk found no `%` and no `+` in the target: its query's
    /// pairs need no decoding, nor a look for what would need it.
    plain: bool,
}

impl<'b> RequestHead<'b> {
    /// True for `HEAD`.
    #[inline]
    pub fn is_head(&self) -> bool {
        self.head_request
    }

    /// The header fields in order, as received: name and value.
    pub fn fields(&self) -> impl ExactSizeIterator<Item = (&'b str, &'b [u8])> + '_ {
        self.fields.iter().map(|f| (f.name, f.value))
    }

    /// The value of the first field named `name` (in any case), if any.
    ///
    /// ```
    /// # use std::mem::MaybeUninit;
    /// # use unflat_server::h1::{parse_head, HeadLimits, Parsed};
    /// let input = b"GET /a%20b?x=1+2 HTTP/1.1\r\nHost: t\r\nCookie: a=1\r\ncookie: b=2\r\n\r\n";
    /// let mut fields = [MaybeUninit::uninit(); 8];
    /// let limits = HeadLimits { head: 8192, request_line: 8192, fields: 8 };
    /// let Parsed::Complete(head) = parse_head(input, &mut fields, limits) else {
    ///     panic!("a whole head")
    /// };
    /// assert_eq!(head.field("HOST"), Some(&b"t"[..]));
    /// let cookies: Vec<&[u8]> = head.field_values("Cookie").collect();
    /// assert_eq!(cookies, [&b"a=1"[..], b"b=2"]);
    /// assert_eq!(head.decoded_path(), "/a b");
    /// let (name, value) = head.query_pairs().next().unwrap().unwrap();
    /// assert_eq!((&*name, &*value), ("x", "1 2"));
    /// ```
    pub fn field(&self, name: &str) -> Option<&'b [u8]> {
        self.field_values(name).next()
    }

    /// The values of every field named `name` (in any case), in order: a
    /// repeated field's (`Cookie`, `Accept`) each.
    pub fn field_values<'n>(&self, name: &'n str) -> impl Iterator<Item = &'b [u8]> + 'n
    where
        'b: 'n,
    {
        let fields = self.fields;
        fields
            .iter()
            .filter(move |f| f.name.eq_ignore_ascii_case(name))
            .map(|f| f.value)
    }

    /// The path percent-decoded: borrowed as sent when it has no escape
    /// (nothing allocated), else decoded. Always text: a path whose escapes
    /// do not decode to UTF-8 was refused with 400.
    pub fn decoded_path(&self) -> Cow<'b, str> {
        percent_encoding::percent_decode_str(self.path)
            .decode_utf8()
            .expect("checked when the head was parsed")
    }

    /// The query's `name=value` pairs, in order, percent-decoded with `+`
    /// as a space: borrowed when the query has no escape (nothing
    /// allocated); a pair that cannot be decoded is an error naming it.
    #[inline]
    pub fn query_pairs(&self) -> impl Iterator<Item = Result<Pair<'b>, QueryError>> {
        pairs(self.query, self.plain)
    }

    /// Whether the target holds no `%` and no `+`: its query's pairs are
    /// as sent ([`plain_pairs`](super::plain_pairs) reads them).
    #[inline]
    pub fn query_is_plain(&self) -> bool {
        self.plain
    }
}

/// What [`parse_head`] found.
#[derive(Debug)]
pub enum Parsed<'b> {
    /// A whole head, checked.
    Complete(RequestHead<'b>),
    /// More bytes are needed.
    Partial,
    /// The head is refused; its answer has no body when `head_request`.
    Rejected {
        /// The status and the reason.
        reject: Reject,
        /// Whether the refused request is a `HEAD` (as far as its method
        /// could be read).
        head_request: bool,
    },
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
    let scanned = match scan(input, &mut fields[..max_fields]) {
        Ok(Some(scanned)) => scanned,
        Ok(None) => {
            return match over_limits(input, limits) {
                Some(r) => refused(r, input),
                None => Parsed::Partial,
            }
        }
        Err(e) => return on_error(e, input, limits),
    };
    let Scanned {
        method,
        target,
        walked,
        version,
        fields,
        len,
    } = scanned;
    let rejected = |reject| Parsed::Rejected {
        reject,
        head_request: method == "HEAD",
    };
    // The request line's length from its parts, without a scan: `method SP
    // target SP HTTP/1.x` (httparse allows no other spacing).
    if let Some(r) = line_and_head_limits(method.len() + target.len() + 10, len, limits) {
        return rejected(r);
    }
    let (path, query) = match parse_target(method, target, walked) {
        Ok(parts) => parts,
        Err(r) => return rejected(r),
    };
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
            wants_keep_alive: checked.wants_keep_alive,
            expect_continue: checked.expect_continue,
            head_request: method == "HEAD",
            plain: walked.plain,
        }),
        Err(r) => rejected(r),
    }
}

/// The refusal `reject` of the head at the start of `input`, whose method
/// the parser did not reach or keep.
fn refused(reject: Reject, input: &[u8]) -> Parsed<'_> {
    Parsed::Rejected {
        reject,
        head_request: begins_head_request(input),
    }
}

/// The first line of `input` (after the empty lines a request may begin
/// with), without its line end, at most `most` bytes.
pub fn first_line(input: &[u8], most: usize) -> &[u8] {
    let line = after_empty_lines(input);
    let end = line.iter().position(|&b| b == b'\n').unwrap_or(line.len());
    let line = &line[..end.min(most)];
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// True when `input` begins a `HEAD` request (after the empty lines a
/// request may begin with): for a head refused, or not complete in time,
/// before its method was parsed. Its answer then carries no body.
pub fn begins_head_request(input: &[u8]) -> bool {
    after_empty_lines(input).starts_with(b"HEAD ")
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
fn on_error(e: httparse::Error, input: &[u8], limits: HeadLimits) -> Parsed<'_> {
    use httparse::Error as E;
    if let Some(r) = over_limits(input, limits) {
        return refused(r, input);
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
    refused(r, input)
}

/// `input` from its request line on: the empty lines a request may begin
/// with (RFC 9112 §2.2) are not part of it.
fn after_empty_lines(input: &[u8]) -> &[u8] {
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
            Parsed::Rejected { reject, .. } => Err(reject.status),
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
}
