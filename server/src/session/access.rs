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
use std::time::{Duration, SystemTime};

/// One response, as the access log writes it.
#[derive(Debug)]
pub struct Entry<'a> {
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
pub fn log(entry: &Entry<'_>) {
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
