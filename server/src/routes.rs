//! Which reply a request gets: the routes, their arguments and their errors.
//! No IO and no encoding here; [`crate::response`] writes the reply.

use std::borrow::Cow;
use std::fmt::Write as _;

use base64::Engine as _;
use unflat::head::Status;

use crate::bodies::Kind;
use crate::request::RequestHead;
use crate::App;

/// What a request is answered with.
#[derive(Debug)]
pub enum Reply {
    /// `GET /`: the help text.
    Help,
    /// `/end-string/{len}?kind=…`.
    EndString {
        /// Characters in the body.
        len: usize,
        /// Which character.
        kind: Kind,
    },
    /// `/large/{bytes}`.
    Large(usize),
    /// `/echo`: the request as received, as JSON; the body is appended once
    /// it has been read.
    Echo(EchoJson),
    /// An error with a plain-text reason.
    Error {
        /// The status.
        status: Status,
        /// Why.
        reason: Cow<'static, str>,
        /// Whether to send `Allow: GET, HEAD` (for 405).
        allow: bool,
    },
}

impl Reply {
    /// An error reply.
    pub fn error(status: Status, reason: impl Into<Cow<'static, str>>) -> Reply {
        Reply::Error {
            status,
            reason: reason.into(),
            allow: false,
        }
    }

    /// True for `/echo`, whose request body is kept.
    pub fn wants_body(&self) -> bool {
        matches!(self, Reply::Echo(_))
    }
}

/// The routes, for the help text and 404s.
pub const ROUTES: &str = "\
GET|HEAD /end-string/{len}?kind=ascii|latin1|twobyte
GET|HEAD /large/{bytes}
*        /echo
GET|HEAD /
";

/// Chooses the reply for a request head.
pub fn route(app: &App, head: &RequestHead<'_>) -> Reply {
    let path = head.path();
    let get_or_head = head.method == "GET" || head.method == "HEAD";
    if path == "/echo" {
        return Reply::Echo(EchoJson::new(head));
    }
    let known = path == "/" || path.starts_with("/end-string/") || path.starts_with("/large/");
    if !known {
        return Reply::error(
            Status::NOT_FOUND,
            format!("no route for {path}; routes:\n{ROUTES}"),
        );
    }
    if !get_or_head {
        return Reply::Error {
            status: Status::METHOD_NOT_ALLOWED,
            reason: Cow::Owned(format!(
                "{} is not allowed on {path}; use GET or HEAD",
                head.method
            )),
            allow: true,
        };
    }
    if path == "/" {
        return match head.query() {
            None => Reply::Help,
            Some(_) => Reply::error(Status::BAD_REQUEST, "/ takes no query"),
        };
    }
    if let Some(len) = path.strip_prefix("/end-string/") {
        return end_string(app, len, head.query());
    }
    if let Some(size) = path.strip_prefix("/large/") {
        return large(app, size, head.query());
    }
    unreachable!("every known path is handled above")
}

fn parse_count(what: &str, s: &str) -> Result<usize, Reply> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Reply::error(
            Status::BAD_REQUEST,
            format!("{what} must be a decimal number, got {s:?}"),
        ));
    }
    s.parse()
        .map_err(|_| Reply::error(Status::BAD_REQUEST, format!("{what} {s} is out of range")))
}

fn end_string(app: &App, len: &str, query: Option<&str>) -> Reply {
    let len = match parse_count("len", len) {
        Ok(n) => n,
        Err(e) => return e,
    };
    if len > app.config.max_len {
        return Reply::error(
            Status::BAD_REQUEST,
            format!(
                "len {len} exceeds the limit of {} characters (--max-len)",
                app.config.max_len
            ),
        );
    }
    let mut kind = Kind::Ascii;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("kind", value)) => match Kind::parse(value) {
                Some(k) => kind = k,
                None => {
                    return Reply::error(
                        Status::BAD_REQUEST,
                        format!("unknown kind {value:?}: expected ascii, latin1 or twobyte"),
                    )
                }
            },
            _ => {
                return Reply::error(
                    Status::BAD_REQUEST,
                    format!("unknown query parameter {pair:?}: only kind=ascii|latin1|twobyte"),
                )
            }
        }
    }
    Reply::EndString { len, kind }
}

fn large(app: &App, size: &str, query: Option<&str>) -> Reply {
    if query.is_some() {
        return Reply::error(Status::BAD_REQUEST, "/large/{bytes} takes no query");
    }
    match parse_count("bytes", size) {
        Ok(n) if n > app.config.max_large => Reply::error(
            Status::BAD_REQUEST,
            format!(
                "{n} bytes exceeds the limit of {} (--max-large)",
                app.config.max_large
            ),
        ),
        Ok(n) => Reply::Large(n),
        Err(e) => e,
    }
}

/// The JSON `/echo` answers with: method, target, version, fields (name,
/// value pairs in order) and body, every one base64-encoded — the origin
/// format of the HTTP Garden differential harness.
#[derive(Debug)]
pub struct EchoJson {
    /// Everything up to the body's value.
    prefix: String,
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

impl EchoJson {
    fn new(head: &RequestHead<'_>) -> EchoJson {
        let version = if head.version == 0 {
            "HTTP/1.0"
        } else {
            "HTTP/1.1"
        };
        let mut prefix = String::with_capacity(256);
        // base64 has no character JSON must escape, so plain formatting is
        // well-formed JSON.
        let _ = write!(
            prefix,
            "{{\"method\":\"{}\",\"target\":\"{}\",\"version\":\"{}\",\"headers\":[",
            b64(head.method.as_bytes()),
            b64(head.target.as_bytes()),
            b64(version.as_bytes())
        );
        for (i, f) in head.fields.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(
                prefix,
                "{sep}[\"{}\",\"{}\"]",
                b64(f.name.as_bytes()),
                b64(f.value)
            );
        }
        prefix.push_str("],\"body\":\"");
        EchoJson { prefix }
    }

    /// The whole JSON document, with `body`.
    pub fn finish(&self, body: &[u8]) -> Vec<u8> {
        let mut out = self.prefix.clone().into_bytes();
        out.extend_from_slice(b64(body).as_bytes());
        out.extend_from_slice(b"\"}\n");
        out
    }
}
