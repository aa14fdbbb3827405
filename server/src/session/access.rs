//! The access log (`--access-log`): one line per response, on stderr.
//!
//! ```text
//! 2026-12-01T04:07:12.215216Z access peer=127.0.0.1:53844 method=GET target=/end-string/3?kind=%74wobyte status=200 bytes=9 duration_us=221
//! ```
//!
//! Written by the server itself rather than as a `tracing` event: the
//! formatter escapes a message character by character, which made a line
//! cost more than the request it logs (docs/operations.md has the
//! measurement). Nothing here needs escaping: a method is a token, and a
//! request target holds URI bytes only (printable ASCII, no space), both
//! checked before a request is routed. Each line is one `write` to stderr,
//! so lines from several workers never interleave.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};

/// One response, as the access log writes it.
#[derive(Debug)]
struct Entry<'a> {
    /// The peer's address (`-` when unknown).
    pub peer: &'a str,
    /// The request's method (`-` for a request refused before its head was
    /// read).
    pub method: &'a str,
    /// The request target as sent (`-` likewise).
    pub target: &'a str,
    /// The status code sent.
    pub status: u16,
    /// Bytes of body sent.
    pub bytes: usize,
    /// From the complete request head to the response queued.
    pub duration: Duration,
}

thread_local! {
    /// The line being written, its buffer kept from one line to the next.
    static LINE: RefCell<String> = RefCell::new(String::with_capacity(256));
}

/// Writes `entry`'s line to stderr, stamped with the current time. A
/// failed write (stderr closed) is ignored: the log must not stop the
/// server.
fn log(entry: &Entry<'_>) {
    LINE.with(|line| {
        let mut line = line.borrow_mut();
        line.clear();
        let _ = writeln!(
            line,
            "{} access peer={} method={} target={} status={} bytes={} duration_us={}",
            humantime::format_rfc3339_micros(SystemTime::now()),
            entry.peer,
            entry.method,
            entry.target,
            entry.status,
            entry.bytes,
            entry.duration.as_micros(),
        );
        let _ = std::io::stderr().write_all(line.as_bytes());
    });
}

/// One connection's access log: nothing at all without `--access-log`
/// (one pointer in the session, which every idle connection keeps).
#[derive(Debug, Default)]
pub(super) struct AccessLog {
    request: Option<Box<Request>>,
}

/// The peer, as the lines write it (rendered once), and the request being
/// answered (a session answers one at a time): its method and target in one
/// buffer, allocated once at the longest request line, so that it never
/// grows.
#[derive(Debug)]
struct Request {
    peer: Option<String>,
    line: String,
    method_len: usize,
    /// When its head was complete.
    began: Instant,
}

impl AccessLog {
    /// A log of requests whose lines are at most `line` bytes long, when
    /// `on`.
    pub(super) fn new(on: bool, line: usize) -> AccessLog {
        AccessLog {
            request: on.then(|| {
                Box::new(Request {
                    peer: None,
                    line: String::with_capacity(line),
                    method_len: 0,
                    began: Instant::now(),
                })
            }),
        }
    }

    /// Names the peer in the lines.
    pub(super) fn set_peer(&mut self, peer: SocketAddr) {
        if let Some(request) = &mut self.request {
            request.peer = Some(peer.to_string());
        }
    }

    /// Notes the request about to be answered: its method and target (`-`
    /// for a request refused before its head was read), from now.
    #[inline]
    pub(super) fn note(&mut self, method: &str, target: &str) {
        let Some(request) = &mut self.request else {
            return;
        };
        // Both come from one request line, which is never longer than the
        // buffer: it does not grow.
        request.line.clear();
        request.line.push_str(method);
        request.line.push_str(target);
        request.method_len = method.len();
        request.began = Instant::now();
    }

    /// Writes the line of the response to the noted request.
    pub(super) fn write(&self, status: u16, bytes: usize) {
        if let Some(request) = &self.request {
            let (method, target) = request.line.split_at(request.method_len);
            log(&Entry {
                peer: request.peer.as_deref().unwrap_or("-"),
                method,
                target,
                status,
                bytes,
                duration: request.began.elapsed(),
            });
        }
    }

    /// Bytes its buffer takes.
    pub(super) fn capacity(&self) -> usize {
        self.request.as_ref().map_or(0, |r| r.line.capacity())
    }
}
