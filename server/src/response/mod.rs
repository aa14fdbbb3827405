//! The one [`Writer`] of responses into the connection's [`WriteQueue`], by
//! [`Strategy`]: **direct** encodes the [`Head`] rope straight into the write
//! buffer and queues the body in its own form (shared or copied as the
//! queue's [`Policy`](unflat::queue::Policy) decides); **flatten**, the old
//! path, copies head and body into one flat string first. Both write the
//! same bytes.
//!
//! **Counted before written**: the connection's [`Budget`] must cover what
//! the queue will occupy once a response is in it
//! ([`WriteQueue::footprint_after`]), or the writer fails with [`Full`] and
//! queues nothing.

mod bound;
mod date;
mod direct;
mod fields;
mod flatten;
mod stream;
mod template;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

use bytes::Bytes;

use unflat::head::{DateLine, Framing, Head, Line, Persistence, Prefix, RequestMethod, Status};
use unflat::queue::{Push, Pushes, SharedRope, WriteQueue};
use unflat::{storage_size, Encoding, Measured, Mode, Rope};

use crate::memory::{Budget, Full, Memory};
pub use fields::{FieldError, Fields, Part, Value, MAX_FIELDS};
pub use stream::{Chunk, Stream};
use template::Key;

/// How responses are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Strategy {
    /// Heads and text bodies encoded straight into the write buffer; large
    /// bodies sent as iovecs at their own memory.
    Direct,
    /// The old copying path: head and body collected into one new flat
    /// buffer, then copied into the write buffer; `/large` payloads copied
    /// into a fresh owned buffer first.
    Flatten,
}

impl Strategy {
    /// The flag value.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Direct => "direct",
            Strategy::Flatten => "flatten",
        }
    }
}

/// The body of a response, in whatever form its route keeps it.
#[derive(Clone, Copy)]
pub enum Body<'a> {
    /// No body.
    Empty,
    /// Bytes sent as they are, copied (help text, error reasons, echo).
    Bytes(&'a [u8]),
    /// ASCII text in one shared buffer (flatten joins it to the head as
    /// text, as Node joined a string).
    SharedText(&'a Bytes),
    /// A ropey rope of this many UTF-8 bytes: its chunks shared or copied.
    Rope(&'a ropey::Rope, usize),
    /// One-byte or two-byte text, encoded to UTF-8 as it is sent; this many
    /// UTF-8 bytes.
    Transcoded(&'a SharedRope, usize),
    /// A shared payload (flatten copies it into an owned buffer first, the
    /// Deno path before its fix).
    SharedBytes(&'a Bytes),
    /// A body of this many bytes, announced but never sent: a `HEAD` that
    /// knows its length without building the body.
    Unsent(usize),
    /// A body of unknown length, asked of the reply a [`Chunk`] at a time
    /// ([`Reply::poll_chunk`]): chunked to HTTP/1.1, ended by the close to
    /// HTTP/1.0, nothing after a `HEAD`.
    ///
    /// [`Reply::poll_chunk`]: crate::service::Reply::poll_chunk
    Stream,
}

impl std::fmt::Debug for Body<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let form = match self {
            Body::Empty => "Empty",
            Body::Bytes(_) => "Bytes",
            Body::SharedText(_) => "SharedText",
            Body::Rope(..) => "Rope",
            Body::Transcoded(..) => "Transcoded",
            Body::SharedBytes(_) => "SharedBytes",
            Body::Unsent(_) => "Unsent",
            Body::Stream => return f.write_str("Stream"),
        };
        write!(f, "{form}({} bytes)", self.content_length())
    }
}

impl Body<'_> {
    /// The body's `Content-Length` (0 for a stream, which sends none).
    pub fn content_length(&self) -> usize {
        match *self {
            Body::Empty | Body::Stream => 0,
            Body::Bytes(b) => b.len(),
            Body::SharedText(b) | Body::SharedBytes(b) => b.len(),
            Body::Rope(_, n) | Body::Transcoded(_, n) | Body::Unsent(n) => n,
        }
    }
}

/// What the request asked of its response, as the session hands it to the
/// writer; only the writer decides what that means for the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exchange {
    /// Whether the connection stays open after the response.
    pub keep_alive: bool,
    /// Whether the request was `HEAD`.
    pub head_request: bool,
    /// Whether the client takes a chunked body (it spoke HTTP/1.1): a
    /// stream to an HTTP/1.0 client ends when the connection closes.
    pub takes_chunked: bool,
}

impl Exchange {
    /// Whether a body can be sent at all: never to a `HEAD` (RFC 9110
    /// §9.3.2). A service may skip work whose result would not be sent.
    pub fn sends_content(self) -> bool {
        !self.head_request
    }

    /// The request's method as the response head takes it.
    fn method(self) -> RequestMethod {
        if self.head_request {
            RequestMethod::Head
        } else {
            RequestMethod::Other
        }
    }
}

/// One response to write, as a service gives it: a status, its own field
/// lines, a body in its form. Framing, `Date` and persistence are the
/// writer's.
#[derive(Debug)]
pub struct Response<'a> {
    /// The status line and the route's field lines.
    pub start: Start<'a>,
    /// The body.
    pub body: Body<'a>,
}

/// How a response's head begins: its status line and its route's field
/// lines, besides what the writer adds.
#[derive(Clone, Copy, Debug)]
pub enum Start<'a> {
    /// A status and the route's prepared field lines (`Content-Type`,
    /// `Allow`, …, two at most; any number more as the response's own
    /// [`Fields`]), put together for this response.
    Lines(Status, [Option<&'a Line>; 2]),
    /// The same, rendered once for every response of its kind.
    Prepared(&'a Prepared),
}

impl<'a> Response<'a> {
    /// A response of `status`, with `fields`, and `body`.
    pub fn new(status: Status, fields: [Option<&'a Line>; 2], body: Body<'a>) -> Response<'a> {
        Response {
            start: Start::Lines(status, fields),
            body,
        }
    }

    /// A response that begins with `start`, and `body`.
    pub fn prepared(start: &'a Prepared, body: Body<'a>) -> Response<'a> {
        Response {
            start: Start::Prepared(start),
            body,
        }
    }

    /// The response's status.
    pub fn status(&self) -> Status {
        match self.start {
            Start::Lines(status, _) => status,
            Start::Prepared(p) => p.0.status(),
        }
    }
}

/// The start of every response of one kind — status line, field lines and
/// `X-Content-Type-Options` — rendered once and copied into each head as one
/// [`Prefix`]: the bytes of [`Start::Lines`], for less work per response.
/// The whole heads made from it are kept as templates (`template.rs`).
#[derive(Debug)]
pub struct Prepared(Prefix, u64);

impl Prepared {
    /// The start of a response of `status` with `fields`.
    pub fn new(status: Status, fields: [Option<&Line>; 2]) -> Prepared {
        // A number of its own, never reused, names its templates: an address
        // could be another start's once this one is dropped.
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let lines: Vec<&Line> = fields.into_iter().flatten().chain(fixed(status)).collect();
        Prepared(
            Prefix::new(status, &lines).expect("routes give no framing lines"),
            NEXT.fetch_add(1, Ordering::Relaxed),
        )
    }
}

/// `X-Content-Type-Options: nosniff` on every response that can carry a
/// body, so that no body the server sends is sniffed into another type.
fn fixed(status: Status) -> Option<&'static Line> {
    static NOSNIFF: LazyLock<Line> = LazyLock::new(|| {
        Line::parse("X-Content-Type-Options", "nosniff")
            .expect("a valid X-Content-Type-Options line")
    });
    (!status.has_no_body()).then(|| &*NOSNIFF)
}

/// What the writer queued for one response: for the access log and the
/// metrics.
#[derive(Clone, Copy, Debug)]
pub struct Written {
    /// The status sent.
    pub status: Status,
    /// Bytes of body sent (none after a `HEAD`, or on 204 and 304).
    pub body_bytes: usize,
    /// Whether the queue holds the body by reference: its owner must then
    /// keep it alive until the response is written.
    pub references_body: bool,
    /// Whether the connection stays open after the response: as asked,
    /// unless a stream to an HTTP/1.0 client is ended by closing it.
    pub keep_alive: bool,
}

/// How a response is framed for the request it answers.
struct Shape {
    framing: Framing,
    /// Whether the connection stays open after it.
    keep_alive: bool,
    /// Whether its body is sent (not after `HEAD`, nor on 1xx, 204, 304).
    body_allowed: bool,
    /// Whether its body is a stream that is sent.
    streams: bool,
}

impl Shape {
    /// The one place framing and persistence are decided for a response.
    fn of(r: &Response<'_>, exchange: Exchange) -> Shape {
        let status = r.status();
        let streamed = matches!(r.body, Body::Stream);
        // HTTP/1.0 has no chunks: a stream to it ends with the connection.
        let until_close = streamed && !exchange.takes_chunked && !status.has_no_body();
        let framing = if status.has_no_body() || until_close {
            Framing::None
        } else if streamed {
            Framing::Chunked
        } else {
            Framing::Length(r.body.content_length() as u64)
        };
        let body_allowed = exchange.sends_content() && !status.has_no_body();
        Shape {
            framing,
            keep_alive: exchange.keep_alive && !(until_close && exchange.sends_content()),
            body_allowed,
            streams: streamed && body_allowed,
        }
    }
}

/// The head of a streamed response, rendered but not queued
/// ([`Writer::stream_head`]).
#[derive(Debug)]
pub struct StreamHead {
    bytes: Vec<u8>,
    /// The status it sends.
    pub status: Status,
    /// Whether the connection stays open after the stream.
    pub keep_alive: bool,
}

/// Room for the service's two field lines and `X-Content-Type-Options`;
/// framing, date and connection lines are the head's own.
const ROOM: usize = 3;

/// Room for those and a response's own [`Fields`].
const ROOM_WITH_FIELDS: usize = ROOM + MAX_FIELDS;

/// The one place a response becomes bytes: status line and fields, `Date`,
/// framing, persistence, no body after `HEAD`. One per server.
#[derive(Debug)]
pub struct Writer {
    strategy: Strategy,
    /// `Keep-Alive: timeout=N`.
    keep_alive: Line,
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
            memory,
        }
    }

    /// Queues the core's own refusal: `status` with `reason` as plain text,
    /// and `Retry-After: 1` when `retry_after` (a limit the server is at now).
    #[allow(clippy::too_many_arguments)]
    pub fn refuse(
        &self,
        queue: &mut WriteQueue,
        status: Status,
        reason: &str,
        retry_after: bool,
        exchange: Exchange,
        budget: &mut Budget,
    ) -> Result<Written, Full> {
        static TEXT_PLAIN: LazyLock<Line> = LazyLock::new(|| {
            Line::parse("Content-Type", "text/plain; charset=utf-8").expect("a valid Content-Type")
        });
        static RETRY_AFTER: LazyLock<Line> =
            LazyLock::new(|| Line::parse("Retry-After", "1").expect("a valid Retry-After"));
        // A refusal is rare: its line ending made here is no cost to a
        // request answered.
        let text: std::borrow::Cow<'_, str> = if reason.ends_with('\n') {
            reason.into()
        } else {
            format!("{reason}\n").into()
        };
        let retry = retry_after.then(|| &*RETRY_AFTER);
        let r = Response::new(
            status,
            [Some(&*TEXT_PLAIN), retry],
            Body::Bytes(text.as_bytes()),
        );
        self.write(queue, &r, exchange, budget)
    }

    /// Queues an interim (1xx) response: the status line alone, which ends
    /// no response of the queue's count.
    pub fn interim(
        &self,
        queue: &mut WriteQueue,
        status: Status,
        budget: &mut Budget,
    ) -> Result<(), Full> {
        debug_assert!(status.code() < 200, "an interim status");
        let head = Head::new(status, RequestMethod::Other);
        let len = storage_size(&head, Encoding::Latin1);
        covered(queue, queue.pushes(Push::Copy(len)), 0, budget)?;
        encode(queue, &head, Encoding::Latin1);
        Ok(())
    }

    /// Queues `r`, the answer to a request that asked `exchange`, and says
    /// what was written; fails with [`Full`], queueing nothing, when
    /// `budget` cannot cover it.
    pub fn write(
        &self,
        queue: &mut WriteQueue,
        r: &Response<'_>,
        exchange: Exchange,
        budget: &mut Budget,
    ) -> Result<Written, Full> {
        self.write_fielded(queue, r, None, exchange, budget)
    }

    /// [`Writer::write`] for a response with field lines of its own.
    pub fn write_with(
        &self,
        queue: &mut WriteQueue,
        r: &Response<'_>,
        fields: &Fields<'_>,
        exchange: Exchange,
        budget: &mut Budget,
    ) -> Result<Written, Full> {
        self.write_fielded(queue, r, Some(fields), exchange, budget)
    }

    /// The one body of [`Writer::write`] and [`Writer::write_with`]: made
    /// twice, so that a response without fields of its own (nearly every
    /// one) pays nothing for them.
    #[inline(always)]
    fn write_fielded(
        &self,
        queue: &mut WriteQueue,
        r: &Response<'_>,
        fields: Option<&Fields<'_>>,
        exchange: Exchange,
        budget: &mut Budget,
    ) -> Result<Written, Full> {
        let status = r.status();
        let Shape {
            framing,
            keep_alive,
            body_allowed,
            streams,
        } = Shape::of(r, exchange);
        debug_assert!(!streams, "a stream begins with Writer::stream_head");
        let _ = streams;
        let body = if body_allowed {
            debug_assert!(
                !matches!(r.body, Body::Unsent(_)),
                "only HEAD leaves a body unsent"
            );
            &r.body
        } else {
            &Body::Empty
        };
        let second = date::unix_second();
        let templated = match (self.strategy, r.start) {
            // The same bytes as the head below, from a template.
            (Strategy::Direct, Start::Prepared(start)) if fields.is_none() => {
                let key = Key {
                    start: start.1,
                    framing,
                    flags: u8::from(keep_alive) | u8::from(exchange.head_request) << 1,
                };
                let render = |dst: &mut [u8; template::MOST]| {
                    let date = date::date_line_at(second);
                    let head: Head<'_, ROOM> =
                        self.head(r.start, None, exchange, framing, keep_alive, &date);
                    let len = storage_size(&head, Encoding::Latin1);
                    (len <= dst.len()).then(|| {
                        unflat::write(&head, Encoding::Latin1, Mode::Strict, dst)
                            .expect("a head is one-byte text")
                    })
                };
                template::with_head(key, second, render, |bytes| {
                    put_templated(queue, bytes, body, budget)
                })
            }
            _ => None,
        };
        let shares = match templated {
            Some(shares) => shares?,
            None if fields.is_none() => {
                let date = date::date_line_at(second);
                let head: Head<'_, ROOM> =
                    self.head(r.start, None, exchange, framing, keep_alive, &date);
                self.put(queue, &Measured::new(&head), body, b"", budget)?
            }
            None => {
                let date = date::date_line_at(second);
                let head: Head<'_, ROOM_WITH_FIELDS> =
                    self.head(r.start, fields, exchange, framing, keep_alive, &date);
                self.put(queue, &Measured::new(&head), body, b"", budget)?
            }
        };
        queue.end_response();
        Ok(Written {
            status,
            body_bytes: body.content_length(),
            references_body: shares,
            keep_alive,
        })
    }

    /// The head of `r` rendered apart, when `r` is a stream whose body is
    /// sent (`None`: write it with [`Writer::write`]): a stream's head is
    /// queued only with what follows it ([`Writer::start_stream`]), so that
    /// a stream the lease cannot start is refused whole, never begun.
    pub fn stream_head(
        &self,
        r: &Response<'_>,
        fields: &Fields<'_>,
        exchange: Exchange,
    ) -> Option<StreamHead> {
        let shape = Shape::of(r, exchange);
        if !shape.streams {
            return None;
        }
        let date = date::date_line_at(date::unix_second());
        let (framing, keep_alive) = (shape.framing, shape.keep_alive);
        let fields = (!fields.is_empty()).then_some(fields);
        let head: Head<'_, ROOM_WITH_FIELDS> =
            self.head(r.start, fields, exchange, framing, keep_alive, &date);
        let mut bytes = vec![0; storage_size(&head, Encoding::Latin1)];
        let n = unflat::write(&head, Encoding::Latin1, Mode::Strict, &mut bytes)
            .expect("a head is one-byte text");
        bytes.truncate(n);
        Some(StreamHead {
            bytes,
            status: r.status(),
            keep_alive: shape.keep_alive,
        })
    }

    /// The head of a response that begins with `start`, then `fields`,
    /// framed by `framing`, dated by `date`, with room for `N` fields: the
    /// three lines a response has besides its own fields at most
    /// ([`ROOM`]), and no more, unless it has fields of its own — the head
    /// is built on the stack for every response.
    fn head<'h, const N: usize>(
        &'h self,
        start: Start<'h>,
        fields: Option<&'h Fields<'_>>,
        exchange: Exchange,
        framing: Framing,
        keep_alive: bool,
        date: &'h DateLine,
    ) -> Head<'h, N> {
        let mut head = match start {
            Start::Lines(status, lines) => {
                let mut head = Head::with_room(status, exchange.method());
                for line in lines.into_iter().flatten().chain(fixed(status)) {
                    head.line(line).expect("room for three lines");
                }
                head
            }
            Start::Prepared(start) => Head::prefixed_with_room(&start.0, exchange.method()),
        };
        for (name, value) in fields.into_iter().flat_map(Fields::iter) {
            head.value(name, value)
                .expect("room for the fields, each checked when added");
        }
        head.date(date);
        match framing {
            Framing::None => {}
            Framing::Chunked => {
                head.chunked().expect("one framing on a status with a body");
            }
            Framing::Length(n) => {
                head.content_length(n)
                    .expect("one framing on a status with a body");
            }
        }
        head.persistence(if keep_alive {
            Persistence::KeepAlive(&self.keep_alive)
        } else {
            Persistence::Close
        });
        head
    }

    /// Queues `head`, `body` and `tail` once `budget` covers them (else
    /// queues nothing); whether the queue shares memory of the body.
    fn put<H: Rope>(
        &self,
        queue: &mut WriteQueue,
        head: &Measured<H>,
        body: &Body<'_>,
        tail: &[u8],
        budget: &mut Budget,
    ) -> Result<bool, Full> {
        let head_len = storage_size(head, Encoding::Latin1);
        let (pushes, transient) = match self.strategy {
            Strategy::Direct => (bound::direct_pushes(queue, head_len, body), 0),
            Strategy::Flatten => bound::flattened_pushes(queue, head_len, body),
        };
        let pushes = match tail.len() {
            0 => pushes,
            n => pushes.then(queue.pushes(Push::Copy(n))),
        };
        let after = covered(queue, pushes, transient, budget)?;
        match self.strategy {
            Strategy::Direct => direct::write(queue, head, body),
            Strategy::Flatten => flatten::write(queue, head, body, &self.memory)?,
        }
        if !tail.is_empty() {
            queue.copy(tail);
        }
        debug_assert!(queue.footprint() <= after, "the queue within its bound");
        Ok(self.strategy == Strategy::Direct && pushes.shares)
    }
}

/// Makes `budget` cover what `queue` will occupy after `pushes` (and a
/// `transient` copy made on the way), then makes room for their copied
/// bytes at once; the bound, for the check once they are queued.
fn covered(
    queue: &mut WriteQueue,
    pushes: Pushes,
    transient: usize,
    budget: &mut Budget,
) -> Result<usize, Full> {
    let after = queue.footprint_after(pushes);
    budget.cover(transient + after)?;
    queue.reserve(pushes.copied);
    Ok(after)
}

/// Queues the head `head`, a template's bytes, and `body` by the direct
/// strategy once `budget` covers them (else queues nothing); whether the
/// queue shares memory of the body.
fn put_templated(
    queue: &mut WriteQueue,
    head: &[u8],
    body: &Body<'_>,
    budget: &mut Budget,
) -> Result<bool, Full> {
    let pushes = bound::direct_pushes(queue, head.len(), body);
    let after = covered(queue, pushes, 0, budget)?;
    match *body {
        // A body the queue copies goes in with the head, in one copy.
        Body::Bytes(b) => queue.copy_all(&[head, b]),
        Body::SharedText(b) | Body::SharedBytes(b) if !pushes.shares => {
            queue.copy_all(&[head, b]);
        }
        _ => {
            queue.copy(head);
            direct::body(queue, body);
        }
    }
    debug_assert!(queue.footprint() <= after, "the queue within its bound");
    Ok(pushes.shares)
}

/// Encodes text that cannot fail to encode: heads are one-byte (their
/// values were validated when built) and bodies go to UTF-8.
pub(super) fn encode<R: Rope + ?Sized>(queue: &mut WriteQueue, rope: &R, encoding: Encoding) {
    queue
        .encode(rope, encoding, Mode::Strict)
        .expect("heads are latin1 and bodies utf8: nothing to refuse");
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
        let mut budget = Budget::new(crate::memory::Lease::open(&memory, 0), 0, 0, 0);
        Writer::new(strategy, 5, memory)
            .write(&mut queue, r, exchange, &mut budget)
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
    fn a_prepared_start_writes_the_bytes_of_its_lines() {
        let text = Line::parse("Content-Type", "text/plain").unwrap();
        let body = Bytes::from_static(b"four");
        for status in [Status::OK, Status::NOT_FOUND, Status::NO_CONTENT] {
            let prepared = Prepared::new(status, [Some(&text), None]);
            for strategy in [Strategy::Direct, Strategy::Flatten] {
                for (keep_alive, head_request) in [(true, false), (false, false), (true, true)] {
                    let exchange = Exchange {
                        keep_alive,
                        head_request,
                        takes_chunked: true,
                    };
                    let body = if status.has_no_body() {
                        Body::Empty
                    } else {
                        Body::SharedText(&body)
                    };
                    let lines = Response::new(status, [Some(&text), None], body);
                    let start = Response::prepared(&prepared, body);
                    assert_eq!(start.status(), status);
                    assert_eq!(
                        written(strategy, &start, exchange),
                        written(strategy, &lines, exchange),
                        "{status:?} {strategy:?} {exchange:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn templates_write_the_bytes_of_each_head_however_shapes_alternate() {
        // More shapes than a thread keeps templates of, each asked for in
        // turn three times: a template is never another shape's bytes.
        let text = Line::parse("Content-Type", "text/plain").unwrap();
        let octets = Line::parse("Content-Type", "application/octet-stream").unwrap();
        // A head longer than a template holds: written without one.
        let long = Line::parse(
            "Content-Type",
            &format!("text/plain; x={}", "y".repeat(300)),
        )
        .unwrap();
        let starts = [
            Prepared::new(Status::OK, [Some(&text), None]),
            Prepared::new(Status::OK, [Some(&octets), None]),
            Prepared::new(Status::OK, [Some(&long), None]),
        ];
        let bodies: Vec<Bytes> = [0, 4, 10, 1000].map(|n| Bytes::from(vec![b'x'; n])).into();
        for _ in 0..3 {
            for (start, line) in starts.iter().zip([&text, &octets, &long]) {
                for body in &bodies {
                    for (keep_alive, head_request, takes_chunked) in [
                        (true, false, true),
                        (false, false, true),
                        (true, true, false),
                    ] {
                        let exchange = Exchange {
                            keep_alive,
                            head_request,
                            takes_chunked,
                        };
                        let lines =
                            Response::new(Status::OK, [Some(line), None], Body::SharedText(body));
                        let start = Response::prepared(start, Body::SharedText(body));
                        assert_eq!(
                            written(Strategy::Direct, &start, exchange),
                            written(Strategy::Direct, &lines, exchange),
                            "{} bytes, {exchange:?}",
                            body.len()
                        );
                    }
                }
            }
        }
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
            Body::SharedText(&ascii),
            Body::Rope(&rope, rope.len_bytes()),
            Body::Transcoded(&latin1, 2 * len),
            Body::Transcoded(&two_byte, 3 * len),
            Body::Empty,
            Body::Bytes(b"plain"),
            Body::SharedBytes(&payload),
        ];
        for body in bodies {
            for head_request in [false, true] {
                let r = Response::new(Status::OK, [None, Some(&obs)], body);
                let exchange = Exchange {
                    keep_alive: true,
                    head_request,
                    takes_chunked: true,
                };
                let direct = written(Strategy::Direct, &r, exchange);
                assert!(direct.windows(8).any(|w| w == b"caf\xe9 \xff\r\n"));
                assert_eq!(direct, written(Strategy::Flatten, &r, exchange), "{body:?}");
            }
        }
    }
}
