//! Responses: what a service gives ([`Response`], its [`Body`], its own
//! [`Fields`], a stream's [`Chunk`]s) and the one [`Writer`] of them into
//! the connection's [`WriteQueue`], by
//! [`Strategy`]: **direct** writes the [`Head`]
//! straight into the write buffer and queues the body in its own form
//! (shared or copied as the queue's [`Policy`](unflat::queue::Policy)
//! decides); **flatten**, the old path, copies head and body into one flat
//! string first. Both write the same bytes.
//!
//! **Counted before written**: the connection's
//! [`Budget`] must cover what the queue will occupy
//! once a response is in it
//! ([`WriteQueue::footprint_after`]),
//! or the writer fails with [`Full`] and queues
//! nothing.

mod bound;
mod date;
mod direct;
mod fields;
mod flatten;
mod stream;
mod template;
#[cfg(test)]
mod tests;
mod writer;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;

use bytes::Bytes;

use unflat::head::{Head, Line, Prefix, RequestMethod, Status};
use unflat::queue::{Pushes, SharedRope, WriteQueue};
use unflat::{Encoding, Mode, Rope};

use crate::memory::{Budget, Full};

pub use date::Second;
pub use fields::{Digits, FieldError, Fields, Part, Unsendable, Value, MAX_FIELDS, SERVER};
pub use stream::{Chunk, Stream};
pub use writer::{StreamHead, Writer, Written};

/// How responses are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
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
    /// A response of `status` and `body`, with the field lines added to
    /// [`Reply::respond`](crate::service::Reply::respond)'s [`Fields`].
    pub fn new(status: Status, body: Body<'a>) -> Response<'a> {
        Response {
            start: Start::Lines(status, [None, None]),
            body,
        }
    }

    /// A response of `status` and `body` beginning with up to two field
    /// lines rendered once, ahead of any of its [`Fields`] (a route's
    /// `Content-Type`, its `Allow`): each written as it is, with no check
    /// per response.
    pub fn with_lines(
        status: Status,
        lines: [Option<&'a Line>; 2],
        body: Body<'a>,
    ) -> Response<'a> {
        Response {
            start: Start::Lines(status, lines),
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
        // By reference: a copy of the start cost every response ~20
        // instructions.
        match &self.start {
            Start::Lines(status, _) => *status,
            Start::Prepared(p) => p.prefix.status(),
        }
    }
}

/// The start of every response of one kind — status line, field lines and
/// `X-Content-Type-Options` — rendered once and copied into each head as one
/// [`Prefix`]: the bytes of [`Start::Lines`], for less work per response.
/// The whole heads made from it are kept as templates (`template.rs`).
#[derive(Debug)]
pub struct Prepared {
    prefix: Prefix,
    /// Its own number, never reused, which names its templates: an
    /// address could be another start's once this one is dropped.
    number: u64,
    /// Whether its status sends no body (1xx, 204, 304).
    no_body: bool,
    /// Whether one of its lines is `Server`: the configured one is then
    /// left out.
    names_server: bool,
}

impl Prepared {
    /// The start of a response of `status` with `fields`, made once (at
    /// start-up) for every response of its kind.
    ///
    /// # Panics
    /// On a status that ends no exchange (a final response is 200–599; a
    /// 1xx is interim) and on a field the head writes itself: a start that
    /// could never be sent is refused where it is made.
    pub fn new(status: Status, fields: [Option<&Line>; 2]) -> Prepared {
        assert!(
            is_final(status),
            "a prepared response's status is final (200-599), not {}",
            status.code()
        );
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let lines: Vec<&Line> = fields.into_iter().flatten().chain(fixed(status)).collect();
        Prepared {
            prefix: Prefix::new(status, &lines).expect("routes give no framing lines"),
            number: NEXT.fetch_add(1, Ordering::Relaxed),
            no_body: status.has_no_body(),
            names_server: names_server(lines.iter().copied()),
        }
    }
}

/// Whether one of `lines` is `Server`.
fn names_server<'l>(mut lines: impl Iterator<Item = &'l Line>) -> bool {
    lines.any(|l| fields::is_server(l.name().as_str()))
}

impl Start<'_> {
    /// Whether its lines name `Server`.
    fn names_server(&self) -> bool {
        match self {
            Start::Lines(_, lines) => names_server(lines.iter().flatten().copied()),
            Start::Prepared(p) => p.names_server,
        }
    }
}

/// Whether a response of `status` ends an exchange: 200–599. A 1xx is
/// interim (RFC 9110 §15.2) — written as a final response, the next
/// pipelined response would be taken for this request's answer.
#[inline]
fn is_final(status: Status) -> bool {
    (200..=599).contains(&status.code())
}

/// `X-Content-Type-Options: nosniff` on every response that can carry a
/// body, so that no body the server sends is sniffed into another type.
fn fixed(status: Status) -> Option<&'static Line> {
    static NOSNIFF: LazyLock<Line> = LazyLock::new(|| {
        Line::parse(fields::NOSNIFF, "nosniff").expect("a valid X-Content-Type-Options line")
    });
    (!status.has_no_body()).then(|| &*NOSNIFF)
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

/// Encodes text that cannot fail to encode: bodies go to UTF-8, and a
/// flattened head is its bytes.
fn encode<R: Rope + ?Sized>(queue: &mut WriteQueue, rope: &R, encoding: Encoding) {
    queue
        .encode(rope, encoding, Mode::Strict)
        .expect("utf8 refuses nothing, and a flat head is latin1");
}

/// What goes before a body in the queue: a response's head, written in the
/// one walk that checks its values, or a chunk's size line.
#[derive(Clone, Copy)]
pub(super) enum Lead<'h, 'a, const N: usize> {
    /// A head.
    Head(&'h Head<'a, N>),
    /// Bytes as they are.
    Bytes(&'h [u8]),
}

impl<'h, 'a, const N: usize> Lead<'h, 'a, N> {
    /// The most bytes it takes.
    fn max_len(&self) -> usize {
        match self {
            Lead::Head(head) => head.max_len(),
            Lead::Bytes(b) => b.len(),
        }
    }

    /// Queues it, `len` its [`Lead::max_len`]; nothing of a head whose
    /// value is refused.
    fn queue(&self, queue: &mut WriteQueue, len: usize) -> Result<(), FieldError> {
        match self {
            Lead::Head(head) => {
                queue.head_measured(head, len)?;
            }
            Lead::Bytes(b) => queue.copy(b),
        }
        Ok(())
    }

    /// It, flattened into a new buffer (the flatten strategy's first copy).
    fn flat(&self) -> Result<Vec<u8>, FieldError> {
        match self {
            Lead::Head(head) => Ok(head.to_vec()?),
            Lead::Bytes(b) => Ok(b.to_vec()),
        }
    }
}

/// Why a response was not queued: the budget could not cover it, or it
/// cannot be sent at all.
#[derive(Debug)]
pub enum Unqueued {
    /// The connection's budget could not cover it: nothing queued.
    Full(Full),
    /// It cannot be sent: nothing of it queued, a 500 in its place. Boxed:
    /// the rare case keeps the common result small.
    Unsendable(Box<Unsendable>),
}

impl From<Full> for Unqueued {
    fn from(full: Full) -> Unqueued {
        Unqueued::Full(full)
    }
}

impl From<FieldError> for Unqueued {
    fn from(e: FieldError) -> Unqueued {
        Unqueued::Unsendable(Box::new(Unsendable::Field(e)))
    }
}
