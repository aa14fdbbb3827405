//! `/end-string/{len}?chunks=K`: a built body sent as a stream of `K`
//! chunks, each a slice of the body in the form it is kept — bytes of a
//! flat ASCII body, a rope cut from a ropey rope (its nodes shared), a
//! range of one-byte or two-byte text encoded as it is sent. The chunks
//! share the body's memory, which the cache charged; the reply keeps the
//! body until the last chunk is written. With `&every=MS`, the chunks come
//! one per `MS` milliseconds, on a timer: a stream that waits
//! ([`Reply::poll_chunk`](unflat_server::service::Reply::poll_chunk)).

use std::ops::{ControlFlow, Range};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use unflat::queue::SharedRope;
use unflat::{Piece, Rope};

use super::body::{Built, Text};
use unflat_server::clock::Moment;
use unflat_server::net::timers::Timer;
use unflat_server::response::Chunk;

/// Chunks asked for at most: each costs a size line and a turn of the
/// writer, so a client cannot make one character cost ten bytes and a
/// call.
pub const MAX_CHUNKS: usize = 65_536;

/// The longest wait between two chunks (`&every=MS`), in milliseconds.
pub const MAX_EVERY_MS: u64 = 10_000;

/// The longest a paced stream may take, its waits added up (`chunks ×
/// every`): what a client can make the server hold a connection and its
/// body for.
pub const MAX_PACED: Duration = Duration::from_secs(60);

/// How a body is streamed: in how many chunks, and how far apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Chunks asked for (clamped to the body's characters).
    pub count: usize,
    /// The wait before each chunk after the first; none: at once.
    pub every: Option<Duration>,
}

/// When the next chunk of a paced stream is due, and the timer that says so.
#[derive(Debug)]
struct Pace {
    every: Duration,
    due: Moment,
    timer: Timer,
}

/// A body being sent as `count` chunks of about equal characters.
#[derive(Debug)]
pub struct Chunks {
    body: Arc<Built>,
    /// Characters (code units of the body's own form).
    units: usize,
    count: usize,
    next: usize,
    pace: Option<Box<Pace>>,
}

impl Chunks {
    /// `body` in `plan.count` chunks: at least one, and no more than it has
    /// characters, so that no chunk is empty and a count above the length
    /// costs no more than the length; each after the first `plan.every`
    /// after the one before.
    pub fn new(body: Arc<Built>, plan: Plan) -> Chunks {
        let count = plan.count;
        let units = match &body.text {
            Text::Ascii(b) | Text::Payload(b) => b.len(),
            Text::Rope(r) => r.get().len_chars(),
            Text::Transcoded(t) => t.shape().len(),
        };
        Chunks {
            body,
            units,
            count: count.min(units).max(1),
            next: 0,
            pace: plan.every.map(|every| {
                Box::new(Pace {
                    every,
                    due: Moment::now(),
                    timer: Timer::new(),
                })
            }),
        }
    }

    /// The next chunk once it is due (`None` after the last): at once,
    /// unless the stream is paced. A paced stream keeps a schedule — chunk
    /// `i` is due `i × every` after the first — not a wait after each
    /// chunk: the timer's tick (about a millisecond, coarser under load)
    /// delays a chunk, and the chunks due meanwhile go out together at the
    /// tick, so the stream holds its connection `(count − 1) × every` and a
    /// tick, within [`MAX_PACED`], whatever `every` is. (A wait after each
    /// chunk made `every=1` a tick each: 60 000 chunks held a connection
    /// 12 minutes.)
    pub fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Chunk>> {
        if let Some(pace) = &mut self.pace {
            if self.next > 0 && self.next < self.count {
                std::task::ready!(pace.timer.poll_passed(pace.due, cx));
            }
            pace.due = match self.next {
                0 => Moment::in_(pace.every),
                _ => pace.due.after(pace.every),
            };
        }
        Poll::Ready(self.next_chunk())
    }

    /// The body, for the response's head.
    pub fn body(&self) -> &Built {
        &self.body
    }

    /// The next chunk, `None` after the last. Chunk `i` holds characters
    /// `i * len / K` up to `(i + 1) * len / K`, `K` the count as clamped:
    /// none is empty but the one chunk of an empty body.
    pub fn next_chunk(&mut self) -> Option<Chunk> {
        if self.next == self.count {
            return None;
        }
        let at = |i: usize| (i as u128 * self.units as u128 / self.count as u128) as usize;
        let range = at(self.next)..at(self.next + 1);
        self.next += 1;
        Some(match &self.body.text {
            Text::Ascii(b) | Text::Payload(b) => Chunk::Bytes(b.slice(range)),
            Text::Rope(r) => Chunk::Rope(ropey::Rope::from(r.get().slice(range))),
            Text::Transcoded(t) => Chunk::Text(Arc::new(Part {
                text: t.clone(),
                units: range,
            })),
        })
    }
}

/// Code units `units` of one-byte or two-byte `text`, as a rope of its own
/// that borrows the text's pieces.
struct Part {
    text: SharedRope,
    units: Range<usize>,
}

impl Rope for Part {
    fn for_each_piece<'a>(
        &'a self,
        visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        // Offsets into the piece being visited.
        let (mut from, mut to) = (self.units.start, self.units.end);
        let mut stopped = ControlFlow::Continue(());
        let _ = self.text.for_each_piece(&mut |piece| {
            let n = piece.len();
            let (a, b) = (from.min(n), to.min(n));
            if a < b {
                stopped = visit(piece.split_at(b).0.split_at(a).1);
            }
            (from, to) = (from - a, to - b);
            if to == 0 || stopped.is_break() {
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        });
        stopped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use unflat::{Encoding, Latin1, Utf16};
    use unflat_server::memory::{Memory, Part as Account};

    fn built(text: Text, len: usize) -> Arc<Built> {
        let memory = Arc::new(Memory::new(1 << 20, 1 << 20));
        let charge = memory.charge(Account::Connections, 0).unwrap();
        Arc::new(Built::new(text, len, charge))
    }

    fn utf8(chunk: &Chunk) -> Vec<u8> {
        match chunk {
            Chunk::Bytes(b) => b.to_vec(),
            Chunk::Rope(r) => r.to_string().into_bytes(),
            Chunk::Text(t) => {
                let mut out = vec![0; unflat::size(&**t, Encoding::Utf8)];
                let n =
                    unflat::write(&**t, Encoding::Utf8, unflat::Mode::Strict, &mut out).unwrap();
                out.truncate(n);
                out
            }
        }
    }

    #[test]
    fn the_chunks_of_every_form_join_to_the_body() {
        let text = "é".repeat(10);
        let bodies = [
            Text::Ascii(Bytes::from("a".repeat(10))),
            Text::Rope(unflat::Measured::new(ropey::Rope::from_str(&text))),
            Text::Transcoded(Arc::new(Latin1(vec![0xe9; 10]))),
            Text::Transcoded(Arc::new(Utf16(vec![0xe9; 10]))),
        ];
        for body in bodies {
            let whole = built(body, 0);
            for count in [1, 3, 10, 25] {
                let plan = Plan { count, every: None };
                let mut chunks = Chunks::new(whole.clone(), plan);
                let mut joined = Vec::new();
                let mut n = 0;
                while let Some(chunk) = chunks.next_chunk() {
                    assert_eq!(chunk.len(), utf8(&chunk).len());
                    assert!(!chunk.is_empty(), "{count}: an empty chunk");
                    joined.extend(utf8(&chunk));
                    n += 1;
                }
                // Never more chunks than characters, none of them empty.
                assert_eq!(n, count.min(10));
                let expected = match &whole.text {
                    Text::Ascii(_) => "a".repeat(10),
                    _ => text.clone(),
                };
                assert_eq!(String::from_utf8(joined).unwrap(), expected, "{count}");
            }
        }
    }

    #[test]
    fn an_empty_body_is_one_empty_chunk_whatever_the_count() {
        let plan = Plan {
            count: MAX_CHUNKS,
            every: None,
        };
        let mut chunks = Chunks::new(built(Text::Ascii(Bytes::new()), 0), plan);
        assert!(chunks.next_chunk().is_some_and(|c| c.is_empty()));
        assert!(chunks.next_chunk().is_none());
    }

    #[test]
    fn a_part_cuts_across_pieces() {
        let pieces = ["ab", "cde", "", "f", "ghij"];
        let text: SharedRope = Arc::new(
            pieces
                .iter()
                .map(|p| Latin1(p.as_bytes().to_vec()))
                .collect::<Vec<_>>(),
        );
        let all = pieces.concat();
        for start in 0..=all.len() {
            for end in start..=all.len() {
                let part = Chunk::Text(Arc::new(Part {
                    text: text.clone(),
                    units: start..end,
                }));
                assert_eq!(utf8(&part), &all.as_bytes()[start..end], "{start}..{end}");
            }
        }
    }
}
