//! Writing one response into the connection's [`WriteQueue`], by either
//! strategy.
//!
//! **direct** — the head is a [`Head`] rope composed on the stack and encoded
//! by the one-byte fast path straight into the write buffer. The body then:
//! a ropey rope becomes iovecs at its own chunks (the queue keeps a clone of
//! the rope, an `Arc` increment), a [`Bytes`] payload one iovec at its own
//! memory, one-byte text is encoded by back-of-buffer expansion and two-byte
//! text by the two-byte path, both into the write buffer behind the head.
//! Bodies shorter than `--copy-below` are copied behind the head instead, so
//! that a small response is one contiguous slice.
//!
//! **flatten** — what Node did before the change: the head and the body are
//! collected into one new flat string, which is then encoded into the write
//! buffer, so every byte is copied twice; a `/large` payload is copied into a
//! fresh owned buffer first (the Deno write path before its fix).

use std::cell::Cell;
use std::time::SystemTime;

use bytes::Bytes;
use unflat::flatten::{flatten, Flat};
use unflat::head::{DateLine, Head, Line, Persistence, Status};
use unflat::queue::WriteQueue;
use unflat::{write_buf, Encoding, Latin1, Mode, Rope, Utf16};

use crate::bodies::{EndString, Text};
use crate::config::Strategy;

/// Bodies shorter than this many bytes are copied behind the head in the
/// direct strategy.
///
/// Measured on the 2-core development machine (docs/design.md has the
/// commands): one worker, `wrk -t1 -c50 -d4s -s wrk_scripts/end-string.lua`,
/// three alternating runs per cell, servers started with `--copy-below 0`
/// (every rope body as iovecs at its ~1 KiB chunks) and with a threshold
/// above the length (every body copied). At 16384 bytes copying won every
/// run (+9 %, +12 %, +4 % req/s): one iovec instead of seventeen, and the
/// kernel copies the bytes either way; at 1024 the runs disagreed (±10 %
/// noise); at 65536 and 102400 req/s and server CPU per request were within
/// noise of each other. So bodies are copied up to 32 KiB, and shared as
/// iovecs above, where the saved copy is the larger share.
pub const DEFAULT_COPY_BELOW: usize = 32 * 1024;

/// The body of a response, in whatever form its route keeps it.
#[derive(Debug)]
pub enum Body<'a> {
    /// No body.
    Empty,
    /// Bytes sent as they are (help text, error reasons, echo JSON).
    Bytes(&'a [u8]),
    /// An `/end-string` body in its kind's representation.
    Text(&'a EndString),
    /// A shared payload (`/large`).
    Shared(&'a Bytes),
}

impl Body<'_> {
    /// The body's length on the wire.
    fn len(&self) -> usize {
        match self {
            Body::Empty => 0,
            Body::Bytes(b) => b.len(),
            Body::Text(t) => t.utf8_len,
            Body::Shared(b) => b.len(),
        }
    }
}

/// The header lines every response may carry, rendered once.
#[derive(Debug)]
pub struct Lines {
    /// `Content-Type: text/plain; charset=utf-8`.
    pub text_plain: Line,
    /// `Content-Type: application/json`.
    pub json: Line,
    /// `Keep-Alive: timeout=N`.
    pub keep_alive: Line,
    /// `Allow: GET, HEAD`.
    pub allow: Line,
}

impl Lines {
    /// Renders the lines for an idle timeout of `idle_secs`.
    pub fn new(idle_secs: u64) -> Lines {
        let line = |n, v: &str| Line::parse(n, v).expect("a valid static header line");
        Lines {
            text_plain: line("Content-Type", "text/plain; charset=utf-8"),
            json: line("Content-Type", "application/json"),
            keep_alive: line("Keep-Alive", &format!("timeout={idle_secs}")),
            allow: line("Allow", "GET, HEAD"),
        }
    }
}

/// One response to write.
#[derive(Debug)]
pub struct Response<'a> {
    /// The status.
    pub status: Status,
    /// `Content-Type` (none for bodiless responses).
    pub content_type: Option<&'a Line>,
    /// One more line (e.g. `Allow`).
    pub extra: Option<&'a Line>,
    /// The body.
    pub body: Body<'a>,
    /// Whether the connection stays open.
    pub keep_alive: bool,
    /// Whether the request was `HEAD`.
    pub head_request: bool,
}

thread_local! {
    static DATE: Cell<DateLine> = Cell::new(DateLine::at(SystemTime::now()));
}

/// The current `Date` line: rendered at most once a second per thread.
fn date_line() -> DateLine {
    DATE.with(|d| {
        let mut line = d.get();
        if line.refresh(SystemTime::now()) {
            d.set(line);
        }
        line
    })
}

/// How responses are written on one connection.
#[derive(Clone, Copy, Debug)]
pub struct Writer<'a> {
    /// The strategy.
    pub strategy: Strategy,
    /// The lines.
    pub lines: &'a Lines,
    /// `--copy-below`.
    pub copy_below: usize,
}

impl Writer<'_> {
    /// Queues `r`, marking the end of a response.
    pub fn write(&self, queue: &mut WriteQueue, r: &Response<'_>) {
        let date = date_line();
        let mut head = Head::new(r.status, r.head_request);
        // Two lines at most: the head has room for MAX_FIELDS.
        for line in [r.content_type, r.extra].into_iter().flatten() {
            head.line(line).expect("room for two lines");
        }
        head.date(&date);
        if !r.status.has_no_body() {
            head.content_length(r.body.len() as u64)
                .expect("one framing on a status with a body");
        }
        head.persistence(if r.keep_alive {
            Persistence::KeepAlive(&self.lines.keep_alive)
        } else {
            Persistence::Close
        });
        let body = if head.body_allowed() {
            &r.body
        } else {
            &Body::Empty
        };
        match self.strategy {
            Strategy::Direct => self.direct(queue, &head, body),
            Strategy::Flatten => flattened(queue, &head, body),
        }
        queue.end_response();
    }

    fn direct(&self, queue: &mut WriteQueue, head: &Head<'_>, body: &Body<'_>) {
        encode(queue, head, Encoding::Latin1);
        let small = body.len() < self.copy_below;
        match body {
            Body::Empty => {}
            Body::Bytes(b) => queue.copy(b),
            Body::Shared(b) if small => queue.copy(b),
            Body::Shared(b) => queue.share((*b).clone()),
            Body::Text(t) => match &t.text {
                Text::Rope(rope) if small => encode(queue, rope, Encoding::Utf8),
                Text::Rope(rope) => queue.share_rope(rope.get(), 0..t.utf8_len),
                Text::OneByte(b) => encode(queue, &Latin1(b), Encoding::Utf8),
                Text::TwoByte(u) => encode(queue, &Utf16(u), Encoding::Utf8),
            },
        }
    }
}

/// Encodes text that cannot fail to encode: heads are one-byte (their
/// values were validated when built) and bodies go to UTF-8.
fn encode<R: Rope + ?Sized>(queue: &mut WriteQueue, rope: &R, encoding: Encoding) {
    queue
        .encode(rope, encoding, Mode::Strict)
        .expect("heads are latin1 and bodies utf8: nothing to refuse");
}

/// The flatten strategy. Heads here are ASCII, so encoding them as UTF-8
/// with the body gives the bytes the direct strategy's latin1 gives.
fn flattened(queue: &mut WriteQueue, head: &Head<'_>, body: &Body<'_>) {
    match body {
        Body::Empty => flatten_into(queue, &[head]),
        Body::Bytes(b) => {
            // Bytes are no text: they join the flat head as they are.
            let mut flat = flat_text(&[head]);
            flat.extend_from_slice(b);
            queue.copy(&flat);
        }
        Body::Text(t) => match &t.text {
            Text::Rope(r) => flatten_into(queue, &[head, r]),
            Text::OneByte(b) => flatten_into(queue, &[head, &Latin1(b)]),
            Text::TwoByte(u) => flatten_into(queue, &[head, &Utf16(u)]),
        },
        Body::Shared(payload) => {
            // The pre-fix Deno path: the payload is copied into an owned
            // buffer, which is then written.
            flatten_into(queue, &[head]);
            queue.share(Bytes::from(payload.to_vec()));
        }
    }
}

/// Collects `parts` into one new flat string, then encodes it into the write
/// buffer: the two copies of Node's old `WriteString`.
fn flatten_into(queue: &mut WriteQueue, parts: &[&dyn Rope]) {
    match flatten(parts) {
        Flat::OneByte(flat) => encode(queue, &Latin1(&flat), Encoding::Utf8),
        Flat::TwoByte(flat) => encode(queue, &Utf16(&flat), Encoding::Utf8),
    }
}

/// `parts` flattened and encoded as UTF-8 into a new vector.
fn flat_text(parts: &[&dyn Rope]) -> Vec<u8> {
    let mut out = Vec::new();
    let written = match flatten(parts) {
        Flat::OneByte(flat) => write_buf(&Latin1(&flat), Encoding::Utf8, Mode::Strict, &mut out),
        Flat::TwoByte(flat) => write_buf(&Utf16(&flat), Encoding::Utf8, Mode::Strict, &mut out),
    };
    written.expect("utf8 refuses nothing");
    out
}
