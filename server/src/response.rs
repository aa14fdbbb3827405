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
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Buf, Bytes};
use unflat::flatten::{flatten, Flat};
use unflat::head::{DateLine, Head, Line, Persistence, Status};
use unflat::queue::{SharedRope, WriteQueue};
use unflat::{Encoding, Latin1, Mode, Rope, Utf16};

use crate::config::Strategy;

/// The body of a response, in whatever form its route keeps it.
#[derive(Clone, Copy)]
pub enum Body<'a> {
    /// No body.
    Empty,
    /// Bytes sent as they are, copied (help text, error reasons, echo).
    Bytes(&'a [u8]),
    /// ASCII text in one shared buffer, already its UTF-8: sent from its own
    /// memory (flatten: joined to the head as text).
    Ascii(&'a Bytes),
    /// A ropey rope of this many UTF-8 bytes: its chunks shared or copied.
    Rope(&'a ropey::Rope, usize),
    /// One-byte or two-byte text, encoded to UTF-8 as it is sent; this many
    /// UTF-8 bytes.
    Transcoded(&'a SharedRope, usize),
    /// A shared payload, sent from its own memory (flatten: copied into an
    /// owned buffer first, the Deno path before its fix).
    Shared(&'a Bytes),
    /// A body of this many bytes that is announced but never sent: the
    /// answer to a `HEAD` that knows its length without building the body.
    Unsent(usize),
}

impl std::fmt::Debug for Body<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let form = match self {
            Body::Empty => "Empty",
            Body::Bytes(_) => "Bytes",
            Body::Ascii(_) => "Ascii",
            Body::Rope(..) => "Rope",
            Body::Transcoded(..) => "Transcoded",
            Body::Shared(_) => "Shared",
            Body::Unsent(_) => "Unsent",
        };
        write!(f, "{form}({} bytes)", self.len())
    }
}

impl Body<'_> {
    /// The body's length on the wire.
    pub fn len(&self) -> usize {
        match *self {
            Body::Empty => 0,
            Body::Bytes(b) => b.len(),
            Body::Ascii(b) | Body::Shared(b) => b.len(),
            Body::Rope(_, n) | Body::Transcoded(_, n) | Body::Unsent(n) => n,
        }
    }

    /// True when the body has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What the request asked of its response: whether the connection stays
/// open, and whether it was `HEAD`. The one value the session hands the
/// writer; only the writer (through the head it builds) decides what that
/// means for the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exchange {
    /// Whether the connection stays open after the response.
    pub keep_alive: bool,
    /// Whether the request was `HEAD`.
    pub head_request: bool,
}

impl Exchange {
    /// Whether a body with content can be sent at all: never to a `HEAD`
    /// (RFC 9110 §9.3.2). A route may skip work whose result would not be
    /// sent; the writer applies the rule to the bytes.
    pub fn sends_content(self) -> bool {
        !self.head_request
    }
}

/// One response to write, as a route gives it: a status, its own field
/// lines (rendered once, at start-up), a body in its form. Framing, `Date`
/// and persistence are the writer's.
#[derive(Debug)]
pub struct Response<'a> {
    /// The status.
    pub status: Status,
    /// Field lines (`Content-Type`, `Allow`, …): two at most.
    pub fields: [Option<&'a Line>; 2],
    /// The body.
    pub body: Body<'a>,
}

impl<'a> Response<'a> {
    /// A response of `status`, with `fields`, and `body`.
    pub fn new(status: Status, fields: [Option<&'a Line>; 2], body: Body<'a>) -> Response<'a> {
        Response {
            status,
            fields,
            body,
        }
    }
}

/// What the writer queued for one response: for the access log and the
/// metrics.
#[derive(Clone, Copy, Debug)]
pub struct Written {
    /// The status sent.
    pub status: Status,
    /// Bytes of body sent (none after a `HEAD`, or on 204 and 304).
    pub body_bytes: usize,
}

thread_local! {
    static DATE: Cell<DateLine> = Cell::new(DateLine::at(SystemTime::now()));
}

/// The current `Date` line: rendered at most once a second per thread.
/// The clock is read once per response, so it is the cheapest one that
/// knows the second ([`unix_second`]).
fn date_line() -> DateLine {
    DATE.with(|d| {
        let line = d.get();
        let second = unix_second();
        if second == line.second() {
            return line;
        }
        let line = DateLine::at(UNIX_EPOCH + Duration::from_secs(second));
        d.set(line);
        line
    })
}

/// The wall clock's second since the Unix epoch. On Linux from
/// `CLOCK_REALTIME_COARSE`: the kernel's time as of its last tick, read
/// from the vDSO without reading the time-stamp counter. Under pipelined
/// load the precise clock (`SystemTime::now`, and the subtraction that
/// turns it into seconds) took 5 % of the server's CPU (perf, docs/results.md);
/// a `Date` of one-second resolution loses nothing by lagging a tick
/// (at most a few milliseconds).
#[cfg(target_os = "linux")]
fn unix_second() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
    u64::try_from(now.tv_sec).unwrap_or(0)
}

/// The wall clock's second since the Unix epoch.
#[cfg(not(target_os = "linux"))]
fn unix_second() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A response head: the route's two field lines at most, besides the
/// framing, date and connection lines the head writes itself.
type ResponseHead<'a> = Head<'a, 2>;

/// The one place a response becomes bytes: the status line and the route's
/// fields, `Date`, framing (`Content-Length`, or none on 1xx, 204 and 304),
/// persistence (`Connection`, `Keep-Alive`), no body after a `HEAD`, and the
/// strategy that writes it. One per server, shared by every connection.
#[derive(Debug)]
pub struct Writer {
    strategy: Strategy,
    /// `Keep-Alive: timeout=N`.
    keep_alive: Line,
}

impl Writer {
    /// A writer by `strategy`, advertising an idle timeout of `idle_secs`.
    pub fn new(strategy: Strategy, idle_secs: u64) -> Writer {
        Writer {
            strategy,
            keep_alive: Line::parse("Keep-Alive", &format!("timeout={idle_secs}"))
                .expect("a valid Keep-Alive line"),
        }
    }

    /// Queues an interim (1xx) response: the status line alone, which ends
    /// no response of the queue's count.
    pub fn interim(&self, queue: &mut WriteQueue, status: Status) {
        debug_assert!(status.code() < 200, "an interim status");
        encode(queue, &Head::new(status, false), Encoding::Latin1);
    }

    /// Queues `r`, the answer to a request that asked `exchange`, marking
    /// the end of a response; says what was written.
    pub fn write(&self, queue: &mut WriteQueue, r: &Response<'_>, exchange: Exchange) -> Written {
        let date = date_line();
        // Room for the two lines a response has at most, and no more: the
        // head is built on the stack for every response.
        let mut head = ResponseHead::with_room(r.status, exchange.head_request);
        for line in r.fields.into_iter().flatten() {
            head.line(line).expect("room for two lines");
        }
        head.date(&date);
        if !r.status.has_no_body() {
            head.content_length(r.body.len() as u64)
                .expect("one framing on a status with a body");
        }
        head.persistence(if exchange.keep_alive {
            Persistence::KeepAlive(&self.keep_alive)
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
        Written {
            status: r.status,
            body_bytes: body.len(),
        }
    }
}

/// The direct strategy.
fn direct(queue: &mut WriteQueue, head: &ResponseHead<'_>, body: &Body<'_>) {
    encode(queue, head, Encoding::Latin1);
    let before = queue.remaining();
    match body {
        Body::Empty | Body::Unsent(_) => {}
        Body::Bytes(b) => queue.copy(b),
        Body::Ascii(b) | Body::Shared(b) => queue.share(b),
        Body::Rope(rope, len) => queue.share_rope(rope, 0..*len),
        Body::Transcoded(text, _) => {
            queue
                .stream(text, Encoding::Utf8, Mode::Strict)
                .expect("utf8 refuses nothing");
        }
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
        Body::Ascii(b) => flatten_into(queue, head, &[head, &Latin1(b)]),
        Body::Rope(r, _) => flatten_into(queue, head, &[head, *r]),
        Body::Transcoded(r, _) => flatten_into(queue, head, &[head, &***r]),
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
    use std::sync::Arc;

    use super::*;
    use unflat::head::{HeaderName, HeaderValue};
    use unflat::{Latin1, Utf16};

    /// Everything the writer queues for `r`, Date value blanked.
    fn written(strategy: Strategy, r: &Response<'_>, exchange: Exchange) -> Vec<u8> {
        let mut queue = WriteQueue::new();
        Writer::new(strategy, 5).write(&mut queue, r, exchange);
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
        // both strategies, whatever the body's form.
        let obs = Line::new(
            HeaderName::new("X-Obs").unwrap(),
            HeaderValue::new(b"caf\xe9 \xff").unwrap(),
        );
        let len = 70_000;
        let ascii = Bytes::from(vec![b'a'; len]);
        let rope = ropey::Rope::from_str(&"\u{e9}\u{20ac}".repeat(len / 2));
        let latin1: SharedRope = Arc::new(Latin1(vec![0xe9; len]));
        let two_byte: SharedRope = Arc::new(Utf16(vec![0x20ac; len]));
        let payload = Bytes::from_static(b"payload");
        let bodies = [
            Body::Ascii(&ascii),
            Body::Rope(&rope, rope.len_bytes()),
            Body::Transcoded(&latin1, 2 * len),
            Body::Transcoded(&two_byte, 3 * len),
            Body::Empty,
            Body::Bytes(b"plain"),
            Body::Shared(&payload),
        ];
        for body in bodies {
            for head_request in [false, true] {
                let r = Response {
                    status: Status::OK,
                    fields: [None, Some(&obs)],
                    body,
                };
                let exchange = Exchange {
                    keep_alive: true,
                    head_request,
                };
                let direct = written(Strategy::Direct, &r, exchange);
                assert!(direct.windows(8).any(|w| w == b"caf\xe9 \xff\r\n"));
                assert_eq!(direct, written(Strategy::Flatten, &r, exchange), "{body:?}");
            }
        }
    }
}
