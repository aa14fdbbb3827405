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
//!
//! **Counted before written.** Each response is checked against the
//! connection's [`Lease`] before a byte of it is queued: the writer bounds
//! what the queue's buffers will occupy once it is written
//! ([`WriteQueue::footprint_after`]) and any transient copy (the flat
//! string of the flatten strategy), and refuses with [`Full`] when the
//! lease cannot grow to cover it; nothing is then queued. A flatten copy of
//! a shared payload, which the queue holds by reference, carries its own
//! charge.

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Buf, Bytes};
use unflat::flatten::{flatten, Flat};
use unflat::head::{DateLine, Head, Line, Persistence, Status};
use unflat::queue::{Policy, SharedRope, WriteQueue};
use unflat::{storage_size, Encoding, Latin1, Measured, Mode, Rope, Utf16};

use crate::config::Strategy;
use crate::memory::{Charge, Full, Lease, Memory, Part};

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
    /// Whether the queue holds the body by reference (shared, or framed
    /// from it) rather than copied whole: its owner must then keep it
    /// alive until the response is written.
    pub references_body: bool,
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

/// A response head: the route's two field lines at most and
/// `X-Content-Type-Options`, besides the framing, date and connection lines
/// the head writes itself.
type ResponseHead<'a> = Head<'a, 3>;

/// A response head measured once: its length bounds the response before it
/// is queued, and the queue encodes it without measuring it again.
type MeasuredHead<'h, 'a> = Measured<&'h ResponseHead<'a>>;

/// The longest chunk of a ropey rope (its leaves hold at most 984 bytes on
/// 64-bit targets): a rope whose chunks are all shorter than the copy
/// threshold is queued as one run.
const ROPE_CHUNK_MAX: usize = 1024;

/// What pushing a response's body may add to the queue: bytes copied or
/// encoded into the write buffer (the worst case the queue reserves),
/// whether a framed segment is among them, and segments at most.
#[derive(Clone, Copy, Debug, Default)]
struct Pushes {
    copied: usize,
    framed: bool,
    segments: usize,
}

/// The one place a response becomes bytes: the status line and the route's
/// fields, `Date`, framing (`Content-Length`, or none on 1xx, 204 and 304),
/// persistence (`Connection`, `Keep-Alive`), no body after a `HEAD`, and the
/// strategy that writes it. One per server, shared by every connection.
#[derive(Debug)]
pub struct Writer {
    strategy: Strategy,
    /// `Keep-Alive: timeout=N`.
    keep_alive: Line,
    /// `X-Content-Type-Options: nosniff`, on every response that can carry
    /// a body: no body the server generates is sniffed into another type.
    nosniff: Line,
    /// Charges the copies the flatten strategy makes of shared payloads.
    memory: Arc<Memory>,
}

impl Writer {
    /// A writer by `strategy`, advertising an idle timeout of `idle_secs`,
    /// charging what it copies outside a queue to `memory`.
    pub fn new(strategy: Strategy, idle_secs: u64, memory: Arc<Memory>) -> Writer {
        Writer {
            strategy,
            keep_alive: Line::parse("Keep-Alive", &format!("timeout={idle_secs}"))
                .expect("a valid Keep-Alive line"),
            nosniff: Line::parse("X-Content-Type-Options", "nosniff")
                .expect("a valid X-Content-Type-Options line"),
            memory,
        }
    }

    /// Queues an interim (1xx) response: the status line alone, which ends
    /// no response of the queue's count; checked against `lease` as
    /// [`Writer::write`] is.
    pub fn interim(
        &self,
        queue: &mut WriteQueue,
        status: Status,
        lease: &mut Lease,
        besides: usize,
    ) -> Result<(), Full> {
        debug_assert!(status.code() < 200, "an interim status");
        let head = Head::new(status, false);
        let len = storage_size(&head, Encoding::Latin1);
        lease.cover(besides + queue.footprint_after(len, false, 1))?;
        encode(queue, &head, Encoding::Latin1);
        Ok(())
    }

    /// Queues `r`, the answer to a request that asked `exchange`, marking
    /// the end of a response; says what was written. First makes `lease`
    /// cover what the connection's buffers will occupy — `besides` bytes
    /// outside the queue, and the queue once `r` is in it — or fails with
    /// [`Full`], queueing nothing.
    pub fn write(
        &self,
        queue: &mut WriteQueue,
        r: &Response<'_>,
        exchange: Exchange,
        lease: &mut Lease,
        besides: usize,
    ) -> Result<Written, Full> {
        let date = date_line();
        // Room for the three lines a response has at most, and no more:
        // the head is built on the stack for every response.
        let mut head = ResponseHead::with_room(r.status, exchange.head_request);
        for line in r.fields.into_iter().flatten() {
            head.line(line).expect("room for two lines");
        }
        head.date(&date);
        if !r.status.has_no_body() {
            head.line(&self.nosniff).expect("room for the third line");
            head.content_length(r.body.len() as u64)
                .expect("one framing on a status with a body");
        }
        head.persistence(if exchange.keep_alive {
            Persistence::KeepAlive(&self.keep_alive)
        } else {
            Persistence::Close
        });
        let body_allowed = head.body_allowed();
        let head = Measured::new(&head);
        let body = if body_allowed {
            debug_assert!(
                !matches!(r.body, Body::Unsent(_)),
                "only HEAD leaves a body unsent"
            );
            &r.body
        } else {
            &Body::Empty
        };
        let head_len = storage_size(&head, Encoding::Latin1);
        let (pushes, transient) = match self.strategy {
            Strategy::Direct => (direct_pushes(queue.policy(), body), 0),
            Strategy::Flatten => flattened_pushes(queue.policy(), head_len, body),
        };
        let after =
            queue.footprint_after(head_len + pushes.copied, pushes.framed, pushes.segments + 1);
        lease.cover(besides + transient + after)?;
        queue.reserve(head_len + pushes.copied);
        match self.strategy {
            Strategy::Direct => direct(queue, &head, body),
            Strategy::Flatten => self.flattened(queue, &head, body)?,
        }
        queue.end_response();
        debug_assert!(queue.footprint() <= after, "the queue within its bound");
        Ok(Written {
            status: r.status,
            body_bytes: body.len(),
            references_body: self.strategy == Strategy::Direct
                && (pushes.framed || pushes.segments > 0),
        })
    }

    /// The flatten strategy.
    fn flattened(
        &self,
        queue: &mut WriteQueue,
        head: &MeasuredHead<'_, '_>,
        body: &Body<'_>,
    ) -> Result<(), Full> {
        match body {
            Body::Empty | Body::Unsent(_) => flatten_into(queue, head, &[head]),
            Body::Bytes(b) => {
                // Bytes are no text: they join the flat head as they are,
                // and the whole is copied into the write buffer.
                let Flat::OneByte(mut flat) = flatten(head.get()) else {
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
                // buffer, which is then written; the copy is charged for as
                // long as the queue holds it.
                let charge = self.memory.charge(Part::Connections, payload.len())?;
                flatten_into(queue, head, &[head]);
                let owned = Bytes::from_owner(Charged {
                    bytes: payload.to_vec(),
                    _charge: charge,
                });
                let before = queue.remaining();
                queue.share(&owned);
                debug_assert_eq!(queue.remaining() - before, payload.len());
            }
        }
        Ok(())
    }
}

/// A buffer and the charge of its memory, dropped together.
struct Charged {
    bytes: Vec<u8>,
    _charge: Charge,
}

impl AsRef<[u8]> for Charged {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

/// What the direct strategy's pushes of `body` may add to a queue of
/// `policy` (see [`direct`], and the queue's own rules: a buffer shorter
/// than the copy threshold is copied, text longer than a frame is framed).
fn direct_pushes(policy: Policy, body: &Body<'_>) -> Pushes {
    let frame = policy.frame.max(unflat::Encoder::MIN_DST);
    let copy = |copied| Pushes {
        copied,
        framed: false,
        segments: 0,
    };
    match *body {
        Body::Empty | Body::Unsent(_) => Pushes::default(),
        Body::Bytes(b) => copy(b.len()),
        Body::Ascii(b) | Body::Shared(b) if b.len() < policy.copy_below => copy(b.len()),
        Body::Ascii(_) | Body::Shared(_) => Pushes {
            segments: 1,
            ..Pushes::default()
        },
        Body::Rope(_, len) => Pushes {
            copied: if len > frame { 0 } else { len },
            framed: len > frame,
            // Runs alternate between shared and copied only when some
            // chunks are long enough to share.
            segments: if policy.copy_below > ROPE_CHUNK_MAX {
                1
            } else {
                len / 256 + 2
            },
        },
        // As `WriteQueue::stream` decides: encoded at once into room for the
        // worst case when that fits a frame, else into room for the exact
        // size when that does, else framed.
        Body::Transcoded(text, len) => match storage_size(&**text, Encoding::Utf8) {
            bound if bound <= frame => copy(bound),
            _ if len <= frame => copy(len),
            _ => Pushes {
                copied: 0,
                framed: true,
                segments: 1,
            },
        },
    }
}

/// What the flatten strategy's writing of `body` behind a head of
/// `head_len` bytes may add to a queue of `policy`, and the transient flat
/// string it builds on the way: at most two bytes per unit of what it
/// flattens, and three bytes of UTF-8 per unit. A shared payload is not
/// flattened: only the head is, and the payload's owned copy carries its
/// own charge (the queue copies it, as any buffer, when it is short).
fn flattened_pushes(policy: Policy, head_len: usize, body: &Body<'_>) -> (Pushes, usize) {
    let flattened = match body {
        Body::Shared(_) => head_len,
        _ => head_len + body.len(),
    };
    let pushes = match *body {
        Body::Empty | Body::Unsent(_) => Pushes::default(),
        Body::Bytes(b) => Pushes {
            copied: b.len(),
            ..Pushes::default()
        },
        Body::Shared(b) if b.len() < policy.copy_below => Pushes {
            copied: b.len(),
            ..Pushes::default()
        },
        Body::Shared(_) => Pushes {
            segments: 1,
            ..Pushes::default()
        },
        Body::Ascii(_) | Body::Rope(..) | Body::Transcoded(..) => Pushes {
            copied: 3 * body.len(),
            ..Pushes::default()
        },
    };
    (pushes, 2 * flattened)
}

/// The direct strategy.
fn direct(queue: &mut WriteQueue, head: &MeasuredHead<'_, '_>, body: &Body<'_>) {
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

/// Collects `parts` — the head first — into one new flat string (copy 1),
/// then encodes it into the write buffer (copy 2): the head's part as
/// latin1, as a head is sent, and the rest as UTF-8.
fn flatten_into(queue: &mut WriteQueue, head: &MeasuredHead<'_, '_>, parts: &[&dyn Rope]) {
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
    use unflat::head::{HeaderName, HeaderValue};
    use unflat::{Latin1, Utf16};

    /// Everything the writer queues for `r`, Date value blanked.
    fn written(strategy: Strategy, r: &Response<'_>, exchange: Exchange) -> Vec<u8> {
        let mut queue = WriteQueue::new();
        let memory = Arc::new(Memory::new(1 << 30, 1 << 30));
        let mut lease = Lease::open(&memory, 0);
        Writer::new(strategy, 5, memory)
            .write(&mut queue, r, exchange, &mut lease, 0)
            .unwrap();
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
