//! Writing one response into the connection's [`WriteQueue`], by either
//! strategy.
//!
//! **direct** — the head is a [`Head`] rope composed on the stack and encoded
//! by the one-byte fast path straight into the write buffer. The body then
//! goes to the queue in the form its route keeps it: a [`Bytes`] (a flat
//! ASCII body, a `/large` payload) or a ropey rope is *shared* — iovecs at
//! its own memory — and one-byte and two-byte text is encoded into the write
//! buffer behind the head (back-of-buffer expansion, the two-byte path), a
//! frame at a time when it is long ([`WriteQueue::stream`]).
//! Whether a shared body is really sent from its own memory or copied behind
//! the head is the queue's decision ([`unflat::queue::Policy`]), made in one
//! place for every body.
//!
//! **flatten** — what Node did before the change: the head and the body are
//! collected into one new flat string, which is then encoded into the write
//! buffer (the head part as latin1, the body as UTF-8), so every byte is
//! copied twice; a `/large` payload is copied into a fresh owned buffer first
//! (the Deno write path before its fix).
//!
//! Both write the same bytes (Date aside).

use std::cell::Cell;
use std::time::SystemTime;

use bytes::{Buf, Bytes};
use unflat::flatten::{flatten, Flat};
use unflat::head::{DateLine, Head, Line, Persistence, Status};
use unflat::queue::WriteQueue;
use unflat::{Encoding, Latin1, Mode, Rope, Utf16};

use crate::bodies::{EndString, Text};
use crate::config::Strategy;

/// The body of a response, in whatever form its route keeps it.
#[derive(Clone, Copy, Debug)]
pub enum Body<'a> {
    /// No body.
    Empty,
    /// Bytes sent as they are (help text, error reasons, echo JSON).
    Bytes(&'a [u8]),
    /// An `/end-string` body in its form.
    Text(&'a EndString),
    /// A shared payload (`/large`).
    Shared(&'a Bytes),
    /// A body of this many bytes that is announced but never sent: the
    /// answer to a `HEAD` that knows its length without building the body.
    Unsent(usize),
}

impl Body<'_> {
    /// The body's length on the wire.
    pub fn len(&self) -> usize {
        match self {
            Body::Empty => 0,
            Body::Bytes(b) => b.len(),
            Body::Text(t) => t.utf8_len,
            Body::Shared(b) => b.len(),
            Body::Unsent(n) => *n,
        }
    }

    /// True when the body has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The header lines every response may carry, rendered once.
#[derive(Debug)]
pub struct Lines {
    /// `Content-Type: text/plain; charset=utf-8`.
    pub text_plain: Line,
    /// `Content-Type: application/json`.
    pub json: Line,
    /// `Content-Type: application/octet-stream`.
    pub octet_stream: Line,
    /// `Keep-Alive: timeout=N`.
    pub keep_alive: Line,
    /// `Allow: GET, HEAD, OPTIONS`: the methods of every path but /echo.
    pub allow: Line,
    /// The methods of `OPTIONS *`: those of some path of the server (/echo
    /// takes any).
    pub allow_any: Line,
}

impl Lines {
    /// Renders the lines for an idle timeout of `idle_secs`.
    pub fn new(idle_secs: u64) -> Lines {
        let line = |n, v: &str| Line::parse(n, v).expect("a valid static header line");
        Lines {
            text_plain: line("Content-Type", "text/plain; charset=utf-8"),
            json: line("Content-Type", "application/json"),
            octet_stream: line("Content-Type", "application/octet-stream"),
            keep_alive: line("Keep-Alive", &format!("timeout={idle_secs}")),
            allow: line("Allow", "GET, HEAD, OPTIONS"),
            allow_any: line("Allow", "GET, HEAD, OPTIONS, POST, PUT, PATCH, DELETE"),
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

/// A response head: `Content-Type` and one more line at most, besides the
/// framing, date and connection lines the head writes itself.
type ResponseHead<'a> = Head<'a, 2>;

/// How responses are written: one per server, shared by every connection.
#[derive(Debug)]
pub struct Writer {
    strategy: Strategy,
    lines: Lines,
}

impl Writer {
    /// A writer by `strategy`, advertising an idle timeout of `idle_secs`.
    pub fn new(strategy: Strategy, idle_secs: u64) -> Writer {
        Writer {
            strategy,
            lines: Lines::new(idle_secs),
        }
    }

    /// The header lines, for building responses.
    pub fn lines(&self) -> &Lines {
        &self.lines
    }

    /// Queues an interim (1xx) response: the status line alone, which ends
    /// no response of the queue's count.
    pub fn interim(&self, queue: &mut WriteQueue, status: Status) {
        debug_assert!(status.code() < 200, "an interim status");
        encode(queue, &Head::new(status, false), Encoding::Latin1);
    }

    /// Queues `r`, marking the end of a response.
    pub fn write(&self, queue: &mut WriteQueue, r: &Response<'_>) {
        let date = date_line();
        // Room for the two lines a response has at most, and no more: the
        // head is built on the stack for every response.
        let mut head = ResponseHead::with_room(r.status, r.head_request);
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
            debug_assert!(
                !matches!(r.body, Body::Unsent(_)),
                "only HEAD leaves a body unsent"
            );
            &r.body
        } else {
            &Body::Empty
        };
        match self.strategy {
            Strategy::Direct => direct(queue, &head, body),
            Strategy::Flatten => flattened(queue, &head, body),
        }
        queue.end_response();
    }
}

/// The direct strategy.
fn direct(queue: &mut WriteQueue, head: &ResponseHead<'_>, body: &Body<'_>) {
    encode(queue, head, Encoding::Latin1);
    let before = queue.remaining();
    match body {
        Body::Empty | Body::Unsent(_) => {}
        Body::Bytes(b) => queue.copy(b),
        Body::Shared(b) => queue.share(b),
        Body::Text(t) => match &t.text {
            Text::Ascii(b) => queue.share(b),
            Text::Rope(rope) => queue.share_rope(rope.get(), 0..t.utf8_len),
            Text::Transcoded(rope) => {
                queue
                    .stream(rope, Encoding::Utf8, Mode::Strict)
                    .expect("utf8 refuses nothing");
            }
        },
    }
    debug_assert_eq!(
        queue.remaining() - before,
        body.len(),
        "the body bytes queued are the Content-Length sent"
    );
}

/// Encodes text that cannot fail to encode: heads are one-byte (their
/// values were validated when built) and bodies go to UTF-8.
fn encode<R: Rope + ?Sized>(queue: &mut WriteQueue, rope: &R, encoding: Encoding) {
    queue
        .encode(rope, encoding, Mode::Strict)
        .expect("heads are latin1 and bodies utf8: nothing to refuse");
}

/// The flatten strategy.
fn flattened(queue: &mut WriteQueue, head: &ResponseHead<'_>, body: &Body<'_>) {
    match body {
        Body::Empty | Body::Unsent(_) => flatten_into(queue, head, &[head]),
        Body::Bytes(b) => {
            // Bytes are no text: they join the flat head as they are, and
            // the whole is copied into the write buffer.
            let Flat::OneByte(mut flat) = flatten(head) else {
                unreachable!("a head is one-byte text");
            };
            flat.extend_from_slice(b);
            queue.copy(&flat);
        }
        Body::Text(t) => match &t.text {
            Text::Ascii(b) => flatten_into(queue, head, &[head, &Latin1(b)]),
            Text::Rope(r) => flatten_into(queue, head, &[head, r]),
            Text::Transcoded(r) => flatten_into(queue, head, &[head, &**r]),
        },
        Body::Shared(payload) => {
            // The pre-fix Deno path: the payload is copied into an owned
            // buffer, which is then written.
            flatten_into(queue, head, &[head]);
            let owned = Bytes::from(payload.to_vec());
            let before = queue.remaining();
            queue.share(&owned);
            debug_assert_eq!(queue.remaining() - before, payload.len());
        }
    }
}

/// Collects `parts` — the head first — into one new flat string (copy 1),
/// then encodes it into the write buffer (copy 2): the head's part as
/// latin1, as a head is sent, and the rest as UTF-8.
fn flatten_into(queue: &mut WriteQueue, head: &ResponseHead<'_>, parts: &[&dyn Rope]) {
    let head_len = head.shape().one_byte;
    match flatten(parts) {
        Flat::OneByte(flat) => {
            encode(queue, &Latin1(&flat[..head_len]), Encoding::Latin1);
            encode(queue, &Latin1(&flat[head_len..]), Encoding::Utf8);
        }
        Flat::TwoByte(flat) => {
            encode(queue, &Utf16(&flat[..head_len]), Encoding::Latin1);
            encode(queue, &Utf16(&flat[head_len..]), Encoding::Utf8);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bodies::{EndString, Form, Key, Kind};
    use unflat::head::{HeaderName, HeaderValue};

    /// Everything the writer queues for `r`, Date value blanked.
    fn written(strategy: Strategy, r: &Response<'_>) -> Vec<u8> {
        let mut queue = WriteQueue::new();
        Writer::new(strategy, 5).write(&mut queue, r);
        let mut out = Vec::new();
        queue.write_to(&mut out).unwrap();
        let at = out
            .windows(6)
            .position(|w| w == b"Date: ")
            .expect("a Date line")
            + 6;
        out[at..at + 29].fill(b'*');
        out
    }

    #[test]
    fn both_strategies_write_the_same_bytes_obs_text_included() {
        // obs-text in a field value is sent as the bytes it is (Latin-1) by
        // both strategies, whatever the body's representation.
        let obs = Line::new(
            HeaderName::new("X-Obs").unwrap(),
            HeaderValue::new(b"caf\xe9 \xff").unwrap(),
        );
        let texts: Vec<EndString> = [Kind::Ascii, Kind::Latin1, Kind::TwoByte]
            .into_iter()
            .flat_map(|kind| {
                [Form::Flat, Form::Rope].map(|form| {
                    EndString::build(Key {
                        len: 70_000,
                        kind,
                        form,
                    })
                })
            })
            .collect();
        let payload = Bytes::from_static(b"payload");
        let mut bodies: Vec<Body<'_>> = texts.iter().map(Body::Text).collect();
        bodies.extend([Body::Empty, Body::Bytes(b"plain"), Body::Shared(&payload)]);
        for body in bodies {
            for head_request in [false, true] {
                let r = Response {
                    status: Status::OK,
                    content_type: None,
                    extra: Some(&obs),
                    body,
                    keep_alive: true,
                    head_request,
                };
                let direct = written(Strategy::Direct, &r);
                assert!(direct.windows(8).any(|w| w == b"caf\xe9 \xff\r\n"));
                assert_eq!(direct, written(Strategy::Flatten, &r), "{body:?}");
            }
        }
    }
}
