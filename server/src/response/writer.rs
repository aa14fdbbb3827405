//! The [`Writer`]: where a [`Response`] becomes bytes in the connection's
//! queue — its shape (framing, persistence, body or not) decided once,
//! the head encoded or taken from a template, the body queued by the
//! [`Strategy`], all of it covered by the connection's budget first.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

use unflat::head::{DateLine, Framing, Head, Line, Persistence, RequestMethod, Status};
use unflat::queue::{Push, WriteQueue};

use super::fields::is_server;
use super::template::Key;
use super::{bound, date, direct, fixed, flatten, is_final, template, Second};
use super::{
    covered, Body, Exchange, FieldError, Fields, Lead, Prepared, Response, Start, Strategy,
};
use super::{Unqueued, Unsendable, MAX_FIELDS};
use crate::memory::{Budget, Full, Memory};

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
    /// The one place framing and persistence are decided for a response
    /// with `body` whose status sends none when `no_body` (read once by
    /// the caller: a prepared start knows it).
    #[inline(always)]
    fn of(body: &Body<'_>, no_body: bool, exchange: Exchange) -> Shape {
        let streamed = matches!(body, Body::Stream);
        // HTTP/1.0 has no chunks: a stream to it ends with the connection.
        let until_close = streamed && !exchange.takes_chunked && !no_body;
        let framing = if no_body || until_close {
            Framing::None
        } else if streamed {
            Framing::Chunked
        } else {
            Framing::Length(body.content_length() as u64)
        };
        let body_allowed = exchange.sends_content() && !no_body;
        Shape {
            framing,
            keep_alive: exchange.keep_alive && !(until_close && exchange.sends_content()),
            body_allowed,
            streams: streamed && body_allowed,
        }
    }

    /// What of `body` is sent: all of it, or nothing (after `HEAD`, and on
    /// a status that sends none).
    #[inline(always)]
    fn sent<'r, 'a>(&self, body: &'r Body<'a>) -> &'r Body<'a> {
        if self.body_allowed {
            debug_assert!(
                !matches!(body, Body::Unsent(_)),
                "only HEAD leaves a body unsent"
            );
            body
        } else {
            &Body::Empty
        }
    }
}

/// The head of a streamed response, rendered but not queued
/// ([`Writer::stream_head`]).
#[derive(Debug)]
pub struct StreamHead {
    pub(super) bytes: Vec<u8>,
    /// The status it sends.
    pub status: Status,
    /// Whether the connection stays open after the stream.
    pub keep_alive: bool,
}

/// Room for the service's two field lines, `X-Content-Type-Options` and
/// `Server`; framing, date and connection lines are the head's own.
const ROOM: usize = 4;

/// Room for those and a response's own [`Fields`].
const ROOM_WITH_FIELDS: usize = ROOM + MAX_FIELDS;

/// The one place a response becomes bytes: status line and fields, `Date`,
/// framing, persistence, no body after `HEAD`. One per server.
#[derive(Debug)]
pub struct Writer {
    pub(super) strategy: Strategy,
    /// `Keep-Alive: timeout=N`.
    keep_alive: Line,
    /// `Server: …`, when configured.
    server: Option<Line>,
    /// Its own number, never reused, which owns the thread's templates
    /// while it writes: two writers' heads differ in the lines above.
    number: u64,
    /// Charges the copies the flatten strategy makes of shared payloads.
    memory: Arc<Memory>,
}

impl Writer {
    /// A writer by `strategy`, advertising an idle timeout of `idle_secs`,
    /// sending `server` (a `Server` line) on every final response that
    /// names none of its own, charging what it copies outside a queue to
    /// `memory`.
    ///
    /// # Panics
    /// When `server` is a line of another name.
    pub fn new(
        strategy: Strategy,
        idle_secs: u64,
        server: Option<Line>,
        memory: Arc<Memory>,
    ) -> Writer {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        if let Some(line) = &server {
            assert!(
                is_server(line.name().as_str()),
                "a Server line, not {:?}",
                line.name().as_str()
            );
        }
        Writer {
            strategy,
            keep_alive: Line::parse("Keep-Alive", &format!("timeout={idle_secs}"))
                .expect("a valid Keep-Alive line"),
            server,
            number: NEXT.fetch_add(1, Ordering::Relaxed),
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
        second: Second,
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
        let r = Response::with_lines(
            status,
            [Some(&*TEXT_PLAIN), retry],
            Body::Bytes(text.as_bytes()),
        );
        self.write(queue, &r, exchange, budget, second)
            .map_err(|e| match e {
                Unqueued::Full(full) => full,
                // The core's refusals are final statuses of built lines.
                Unqueued::Unsendable(e) => unreachable!("the core's refusal: {e}"),
            })
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
        covered(queue, queue.pushes(Push::Copy(head.max_len())), 0, budget)?;
        queue.head(&head).expect("a status line alone");
        Ok(())
    }

    /// Queues `r`, the answer to a request that asked `exchange`, dated
    /// `second`, and says what was written; fails, queueing nothing, when
    /// `budget` cannot cover it ([`Unqueued::Full`]) or its status ends no
    /// exchange ([`Unqueued::Unsendable`]: a 1xx is interim, a final
    /// response is 200–599).
    pub fn write(
        &self,
        queue: &mut WriteQueue,
        r: &Response<'_>,
        exchange: Exchange,
        budget: &mut Budget,
        second: Second,
    ) -> Result<Written, Unqueued> {
        if let (Strategy::Direct, Start::Prepared(start)) = (self.strategy, &r.start) {
            if let Some(written) =
                self.write_templated(queue, start, &r.body, exchange, budget, second)
            {
                return written;
            }
        }
        self.write_fielded(queue, r, None, exchange, budget, second)
    }

    /// [`Writer::write`] of a prepared start without fields of its own by
    /// the direct strategy, nearly every response: its whole head from a
    /// template (`None`: a stream's, or one too long to keep, written as
    /// any other). Apart from [`Writer::write_fielded`], so that it decides
    /// only what such a response can vary in: its framing, its
    /// persistence, and whether its body is sent.
    #[inline(always)]
    fn write_templated(
        &self,
        queue: &mut WriteQueue,
        start: &Prepared,
        body: &Body<'_>,
        exchange: Exchange,
        budget: &mut Budget,
        second: Second,
    ) -> Option<Result<Written, Unqueued>> {
        // A stream's head is rendered apart (`Writer::stream_head`).
        if let Body::Stream = body {
            return None;
        }
        let shape = Shape::of(body, start.no_body, exchange);
        let (framing, keep_alive, body) = (shape.framing, shape.keep_alive, shape.sent(body));
        let key = Key::new(start.number, framing, keep_alive, exchange.head_request);
        let second = second.unix();
        let render = |dst: &mut [u8; template::MOST]| {
            self.render(
                Start::Prepared(start),
                exchange,
                framing,
                keep_alive,
                second,
                dst,
            )
        };
        let put = |bytes: &[u8]| put_templated(queue, bytes, body, budget);
        Some(
            match template::with_head(self.number, key, second, render, put)? {
                Ok(shares) => {
                    queue.end_response();
                    Ok(Written {
                        status: start.prefix.status(),
                        body_bytes: body.content_length(),
                        references_body: shares,
                        keep_alive,
                    })
                }
                Err(full) => Err(Unqueued::Full(full)),
            },
        )
    }

    /// [`Writer::write`] for a response with field lines of its own, whose
    /// values are checked as its head is written: one refused fails it
    /// ([`Unqueued::Unsendable`]) with nothing of it queued.
    pub fn write_with(
        &self,
        queue: &mut WriteQueue,
        r: &Response<'_>,
        fields: &Fields<'_>,
        exchange: Exchange,
        budget: &mut Budget,
        second: Second,
    ) -> Result<Written, Unqueued> {
        self.write_fielded(queue, r, Some(fields), exchange, budget, second)
    }

    /// The one body of [`Writer::write`] and [`Writer::write_with`] for a
    /// head rendered for the response. Out of line: the templates' path
    /// ([`Writer::write_templated`]) stays small.
    #[inline(never)]
    fn write_fielded(
        &self,
        queue: &mut WriteQueue,
        r: &Response<'_>,
        fields: Option<&Fields<'_>>,
        exchange: Exchange,
        budget: &mut Budget,
        second: Second,
    ) -> Result<Written, Unqueued> {
        let second = second.unix();
        let status = r.status();
        let shape = Shape::of(&r.body, status.has_no_body(), exchange);
        debug_assert!(!shape.streams, "a stream begins with Writer::stream_head");
        let (framing, keep_alive, body) = (shape.framing, shape.keep_alive, shape.sent(&r.body));
        if !is_final(status) {
            return Err(not_final(status));
        }
        let date = date::date_line_at(second);
        let shares = match fields {
            None => {
                let head: Head<'_, ROOM> =
                    self.head(r.start, None, exchange, framing, keep_alive, &date);
                self.put(queue, Lead::Head(&head), body, b"", budget)?
            }
            Some(fields) => {
                let head: Head<'_, ROOM_WITH_FIELDS> =
                    self.head(r.start, Some(fields), exchange, framing, keep_alive, &date);
                self.put(queue, Lead::Head(&head), body, b"", budget)?
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
    /// a stream the lease cannot start is refused whole, never begun. A
    /// value refused as it is rendered fails it (boxed: the common answer,
    /// `None`, stays one word to test).
    #[inline(always)]
    pub fn stream_head(
        &self,
        r: &Response<'_>,
        fields: &Fields<'_>,
        exchange: Exchange,
        second: Second,
    ) -> Option<Result<StreamHead, Box<FieldError>>> {
        // Nearly every response is no stream: told apart where it is
        // asked, before any call.
        if !matches!(r.body, Body::Stream) {
            return None;
        }
        self.stream_head_of(r, fields, exchange, second)
    }

    /// [`Writer::stream_head`] of a stream.
    #[inline(never)]
    fn stream_head_of(
        &self,
        r: &Response<'_>,
        fields: &Fields<'_>,
        exchange: Exchange,
        second: Second,
    ) -> Option<Result<StreamHead, Box<FieldError>>> {
        let second = second.unix();
        let status = r.status();
        let shape = Shape::of(&r.body, status.has_no_body(), exchange);
        if !shape.streams {
            return None;
        }
        let date = date::date_line_at(second);
        let (framing, keep_alive) = (shape.framing, shape.keep_alive);
        let fields = (!fields.is_empty()).then_some(fields);
        let head: Head<'_, ROOM_WITH_FIELDS> =
            self.head(r.start, fields, exchange, framing, keep_alive, &date);
        Some(match head.to_vec() {
            Ok(bytes) => Ok(StreamHead {
                bytes,
                status,
                keep_alive: shape.keep_alive,
            }),
            Err(e) => Err(Box::new(e.into())),
        })
    }

    /// A template's head, written into `dst` at `second` (`None`: too long
    /// for a template, written as any other). Out of line: rendered once a
    /// second, it stays out of the path that copies the template.
    #[inline(never)]
    fn render(
        &self,
        start: Start<'_>,
        exchange: Exchange,
        framing: Framing,
        keep_alive: bool,
        second: u64,
        dst: &mut [u8],
    ) -> Option<usize> {
        let date = date::date_line_at(second);
        let head: Head<'_, ROOM> = self.head(start, None, exchange, framing, keep_alive, &date);
        head.write(dst).ok()
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
            Start::Prepared(start) => Head::prefixed_with_room(&start.prefix, exchange.method()),
        };
        if let Some(server) = &self.server {
            if !start.names_server() && !fields.is_some_and(Fields::names_server) {
                head.line(server).expect("room for the Server line");
            }
        }
        for (name, value) in fields.into_iter().flat_map(Fields::iter) {
            // Its name checked when added; its value, as it is written.
            head.value(name, value)
                .expect("room for the fields, their names checked when added");
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
    /// queues nothing, nor when a value of the head is refused as it is
    /// written); whether the queue shares memory of the body.
    pub(super) fn put<const N: usize>(
        &self,
        queue: &mut WriteQueue,
        head: Lead<'_, '_, N>,
        body: &Body<'_>,
        tail: &[u8],
        budget: &mut Budget,
    ) -> Result<bool, Unqueued> {
        let head_len = head.max_len();
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
            Strategy::Direct => direct::write(queue, head, head_len, body)?,
            Strategy::Flatten => flatten::write(queue, head, body, &self.memory)?,
        }
        if !tail.is_empty() {
            queue.copy(tail);
        }
        debug_assert!(queue.footprint() <= after, "the queue within its bound");
        Ok(self.strategy == Strategy::Direct && pushes.shares)
    }
}

/// The refusal of a response of `status`, which ends no exchange.
#[cold]
fn not_final(status: Status) -> Unqueued {
    Unqueued::Unsendable(Box::new(Unsendable::Status(status.code())))
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
    // Nearly every templated response: a short body copied behind its
    // head where the queue has room already, so that its footprint stays
    // as it is — what covered the queue then covers it after, and no
    // bound of the pushes is worked out.
    let short = match *body {
        Body::Empty => Some(&[][..]),
        Body::Bytes(b) => Some(b),
        Body::SharedText(b) | Body::SharedBytes(b) if queue.copies(b.len()) => Some(&b[..]),
        _ => None,
    };
    if let Some(b) = short {
        if queue.copies_in_place(head.len() + b.len()) {
            budget.cover(queue.footprint())?;
            queue.copy_all(&[head, b]);
            return Ok(false);
        }
    }
    let pushes = bound::direct_pushes(queue, head.len(), body);
    let after = covered(queue, pushes, 0, budget)?;
    match *body {
        // A body the queue copies goes in with the head, in one copy.
        Body::Bytes(b) => queue.copy_all(&[head, b]),
        Body::SharedText(b) | Body::SharedBytes(b) if !pushes.shares => {
            queue.copy_all(&[head, b]);
        }
        _ if direct::runs_code(body) => {
            let _ = queue.marked(|queue| {
                queue.copy(head);
                direct::body(queue, body);
                Ok::<(), ()>(())
            });
        }
        _ => {
            queue.copy(head);
            direct::body(queue, body);
        }
    }
    debug_assert!(queue.footprint() <= after, "the queue within its bound");
    Ok(pushes.shares)
}
