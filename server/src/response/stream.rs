//! A body of unknown length, queued a chunk at a time: each chunk's size
//! line, then its text in its own form, never flattened first (as Node's
//! `Writev` does for each string chunk). To HTTP/1.0 the chunks go bare and
//! the close ends the body.

use std::io::Write as _;

use bytes::Bytes;
use unflat::queue::{Push, Pushes, SharedRope, WriteQueue};
use unflat::Encoding;

use super::{Body, Lead, Strategy, StreamHead, Unqueued, Writer};
use crate::memory::{Budget, Full};

/// One chunk of a streamed body ([`Body::Stream`]). Memory it shares is
/// its owner's to charge; what the queue copies of it, the budget's.
#[derive(Clone)]
pub enum Chunk {
    /// Bytes sent as they are: shared, or copied when short.
    Bytes(Bytes),
    /// A ropey rope: its chunks shared, or copied when short.
    Rope(ropey::Rope),
    /// Text of any kind, encoded to UTF-8 as it is sent, a frame at a time
    /// when it is long.
    Text(SharedRope),
}

impl Chunk {
    /// Its length on the wire (a text chunk is measured: one walk).
    pub fn len(&self) -> usize {
        match self {
            Chunk::Bytes(b) => b.len(),
            Chunk::Rope(r) => r.len_bytes(),
            Chunk::Text(t) => unflat::size(&**t, Encoding::Utf8),
        }
    }

    /// Whether it holds nothing (an empty chunk is skipped: a chunk of size
    /// 0 would end the body).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Debug for Chunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let form = match self {
            Chunk::Bytes(_) => "Bytes",
            Chunk::Rope(_) => "Rope",
            Chunk::Text(_) => "Text",
        };
        write!(f, "{form}({} bytes)", self.len())
    }
}

/// A streamed response whose head is queued: how its chunks are framed,
/// and how much of its body has gone into the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stream {
    /// Chunked (HTTP/1.1), or bare until the connection closes (HTTP/1.0).
    pub(super) chunked: bool,
    /// Body bytes queued so far, framing not counted.
    pub(super) sent: usize,
}

impl Stream {
    /// A stream whose head is queued, to a client that takes chunks
    /// (`exchange.takes_chunked`) or not.
    pub fn new(exchange: super::Exchange) -> Stream {
        Stream {
            chunked: exchange.takes_chunked,
            sent: 0,
        }
    }

    /// Body bytes queued so far, framing not counted.
    pub fn sent(&self) -> usize {
        self.sent
    }

    /// Whether its body is chunked, so that a cut is seen without the close.
    pub fn is_chunked(&self) -> bool {
        self.chunked
    }
}

/// The last chunk of a chunked body, and the end of its (empty) trailer.
const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// `{size in hex}\r\n`: 16 digits at most.
const SIZE_LINE_MAX: usize = 18;

impl Writer {
    /// Queues `chunk` of `stream` — size line, text, line end — once
    /// `budget` covers it (else queues nothing); an empty chunk queues
    /// nothing. Whether the queue shares memory of the chunk.
    ///
    /// Encoded behind a mark: a text chunk whose encoding panics (its rope
    /// is the application's code) or gives other bytes than it measured
    /// takes back all it queued — never a size line without its data — and
    /// the panic goes on to the session, which cuts the stream.
    pub fn chunk(
        &self,
        queue: &mut WriteQueue,
        stream: &mut Stream,
        chunk: &Chunk,
        budget: &mut Budget,
    ) -> Result<bool, Full> {
        queue.marked(|queue| self.chunk_unmarked(queue, stream, chunk, budget))
    }

    /// [`Writer::chunk`]'s work, within its mark.
    fn chunk_unmarked(
        &self,
        queue: &mut WriteQueue,
        stream: &mut Stream,
        chunk: &Chunk,
        budget: &mut Budget,
    ) -> Result<bool, Full> {
        let len = chunk.len();
        if len == 0 {
            return Ok(false);
        }
        let body = chunk_body(chunk, len);
        let mut line = [0u8; SIZE_LINE_MAX];
        let line_len = if stream.chunked {
            let mut at = &mut line[..];
            write!(at, "{len:X}\r\n").expect("a size line fits");
            SIZE_LINE_MAX - at.len()
        } else {
            0
        };
        let tail: &[u8] = if stream.chunked { b"\r\n" } else { b"" };
        let shares = self.put_bytes(queue, &line[..line_len], &body, tail, budget)?;
        stream.sent += len;
        Ok(shares)
    }

    /// Queues the head of a stream with its first chunk (`None`: the
    /// stream is empty, and its end is covered instead), once `budget`
    /// covers both; else queues nothing, so that the stream can still be
    /// refused with a status of its own.
    pub fn start_stream(
        &self,
        queue: &mut WriteQueue,
        head: &StreamHead,
        stream: &mut Stream,
        first: Option<&Chunk>,
        budget: &mut Budget,
    ) -> Result<(), Full> {
        let head_pushes = queue.pushes(Push::Copy(head.bytes.len()));
        let (next, transient) = match first {
            Some(chunk) => self.chunk_pushes(queue, stream, chunk),
            None => (queue.pushes(Push::Copy(LAST_CHUNK.len())), 0),
        };
        // Covered and reserved together: the pushes below grow nothing.
        super::covered(queue, head_pushes.then(next), transient, budget)?;
        // Behind one mark: a first chunk that fails takes its head back
        // too, so that the stream is not begun and its 500 is whole.
        queue.marked(|queue| {
            queue.copy(&head.bytes);
            match first {
                Some(chunk) => self
                    .chunk_unmarked(queue, stream, chunk, budget)
                    .map(|_| ()),
                None => Ok(()),
            }
        })
    }

    /// What queueing `chunk` of `stream` adds to `queue` (as
    /// [`Writer::chunk`] pushes it), for the direct strategy's bound; the
    /// flatten strategy's, which copies the text, with its transient copy.
    fn chunk_pushes(&self, queue: &WriteQueue, stream: &Stream, chunk: &Chunk) -> (Pushes, usize) {
        let len = chunk.len();
        let framing = if stream.chunked { SIZE_LINE_MAX + 2 } else { 0 };
        let body = chunk_body(chunk, len);
        match self.strategy {
            Strategy::Direct => (super::bound::direct_pushes(queue, framing, &body), 0),
            Strategy::Flatten => super::bound::flattened_pushes(queue, framing, &body),
        }
    }

    /// Ends `stream` (its last chunk when chunked) and the response, once
    /// `budget` covers it (else queues nothing).
    pub fn end_stream(
        &self,
        queue: &mut WriteQueue,
        stream: &Stream,
        budget: &mut Budget,
    ) -> Result<(), Full> {
        if stream.chunked {
            self.put_bytes(queue, LAST_CHUNK, &Body::Empty, b"", budget)?;
        }
        queue.end_response();
        Ok(())
    }
}

impl Writer {
    /// [`Writer::put`] behind bytes (a size line, the last chunk), which
    /// nothing refuses.
    fn put_bytes(
        &self,
        queue: &mut WriteQueue,
        lead: &[u8],
        body: &Body<'_>,
        tail: &[u8],
        budget: &mut Budget,
    ) -> Result<bool, Full> {
        self.put(queue, Lead::<0>::Bytes(lead), body, tail, budget)
            .map_err(|e| match e {
                Unqueued::Full(full) => full,
                Unqueued::Unsendable(e) => unreachable!("bytes are sent as they are: {e}"),
            })
    }
}

/// `chunk` as the body form the writer queues, `len` bytes long.
fn chunk_body(chunk: &Chunk, len: usize) -> Body<'_> {
    match chunk {
        Chunk::Bytes(b) => Body::SharedBytes(b),
        Chunk::Rope(r) => Body::Rope(r, len),
        Chunk::Text(t) => Body::Transcoded(t, len),
    }
}

impl From<Bytes> for Chunk {
    fn from(b: Bytes) -> Chunk {
        Chunk::Bytes(b)
    }
}

impl From<Vec<u8>> for Chunk {
    fn from(b: Vec<u8>) -> Chunk {
        Chunk::Bytes(b.into())
    }
}

impl From<String> for Chunk {
    fn from(s: String) -> Chunk {
        Chunk::Bytes(s.into())
    }
}

impl From<&'static str> for Chunk {
    fn from(s: &'static str) -> Chunk {
        Chunk::Bytes(Bytes::from_static(s.as_bytes()))
    }
}

impl From<&'static [u8]> for Chunk {
    fn from(b: &'static [u8]) -> Chunk {
        Chunk::Bytes(Bytes::from_static(b))
    }
}

impl From<ropey::Rope> for Chunk {
    fn from(r: ropey::Rope) -> Chunk {
        Chunk::Rope(r)
    }
}
