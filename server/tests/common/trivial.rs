//! A trivial service that drives the core in memory for the session tests
//! and the session fuzz target. It answers every request from its head,
//! in whatever body form is asked for, so what those tests check is what
//! the core writes (framing, persistence, HEAD, 1xx/204/304, pipelining,
//! refusals), not the demo's routes.
//!
//! - `/n/{len}`: `len` characters of text. The query holds `&`-separated
//!   options: `form=bytes|shared|text|rope|latin1|twobyte` (default
//!   `bytes`; [`Form`]), `status=CODE` (200 to 599, default 200), `later`
//!   (the body is made by a job that the connection awaits) and `unsent`
//!   (a `HEAD` gets the length alone, [`Body::Unsent`], the body not
//!   made; without it, the core must drop the body it is given), and
//!   `chunks=K` (1 to 1024: the same text as a stream of `K` chunks,
//!   [`Body::Stream`], chunk `i` holding characters `i * len / K` up to
//!   `(i + 1) * len / K`, each made as it is asked for; `unsent` does not
//!   apply). A status of 400 or more refuses from the head.
//! - `/echo`: keeps its request body and answers with it. The query is
//!   ignored, so the framing vectors' `/echo?format=raw` reach it.
//! - `/refuse`: 403, refused from the head (`Expect: 100-continue` gets
//!   it at once).
//! - any other path: 404. A malformed `/n` (bad length, longer than the
//!   service's longest, unknown option): 400, refused from the head.
//!
//! fuzz/fuzz_targets/session.rs includes this file with `#[path]`. The
//! fuzz crate cannot reach `server/tests/common`, and a module in unflat-server
//! kept only for tests would widen the core's public API.

use std::ops::Range;
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll};

use bytes::Bytes;
use unflat::head::{Line, Status};
use unflat::queue::SharedRope;
use unflat::{Latin1, Utf16};
use unflat_server::app::reply::{Handler, Job, Reply};
use unflat_server::h1::RequestHead;
use unflat_server::memory::Full;
use unflat_server::response::{Body, Chunk, Fields, Response};

/// The service; `/n` bodies are at most `longest` characters.
#[derive(Debug)]
pub struct Trivial {
    longest: usize,
}

/// Every response's `Content-Type`.
fn text_plain() -> [Option<&'static Line>; 2] {
    static TEXT_PLAIN: LazyLock<Line> = LazyLock::new(|| {
        Line::parse("Content-Type", "text/plain; charset=utf-8").expect("a valid Content-Type")
    });
    [Some(&TEXT_PLAIN), None]
}

/// The most chunks a `/n` stream is asked in.
pub const MOST_CHUNKS: usize = 1024;

impl Trivial {
    /// A trivial service whose `/n` bodies are at most `longest`
    /// characters (a fuzzer keeps them short).
    pub fn new(longest: usize) -> Trivial {
        Trivial { longest }
    }

    /// The answer to `/n/{len}?{query}`, whose body is sent unless
    /// `head_request`.
    fn plan(&self, len: &str, query: Option<&str>, head_request: bool) -> Answer {
        let Some(len) = digits(len) else {
            return Answer::Bad("the length is not a number");
        };
        if len > self.longest {
            return Answer::Bad("longer than the service's longest");
        }
        let mut plan = Plan {
            form: Form::Bytes,
            len,
            status: Status::OK,
            later: false,
            unsent: false,
            chunks: None,
            sends: !head_request,
        };
        for option in query.unwrap_or("").split('&').filter(|o| !o.is_empty()) {
            match option.split_once('=') {
                None if option == "later" => plan.later = true,
                None if option == "unsent" => plan.unsent = true,
                Some(("form", name)) => match Form::ALL.into_iter().find(|f| f.name() == name) {
                    Some(form) => plan.form = form,
                    None => return Answer::Bad("unknown form"),
                },
                Some(("status", code)) => match digits(code).filter(|c| (200..600).contains(c)) {
                    Some(code) => plan.status = Status::from_code(code as u16).expect("200 to 599"),
                    None => return Answer::Bad("a status is 200 to 599"),
                },
                Some(("chunks", k)) => match digits(k).filter(|k| (1..=MOST_CHUNKS).contains(k)) {
                    Some(k) => plan.chunks = Some(k),
                    None => return Answer::Bad("chunks are 1 to 1024"),
                },
                _ => return Answer::Bad("unknown option"),
            }
        }
        Answer::Make(plan)
    }
}

/// `s` as a number, when it is ASCII digits (no sign), and not too large.
fn digits(s: &str) -> Option<usize> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The body forms of `/n`, each given to the core as its own [`Body`] (or,
/// streamed, its own [`Chunk`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// Copied bytes, [`Body::Bytes`] (streamed: [`Chunk::Bytes`]).
    Bytes,
    /// A shared payload, [`Body::SharedBytes`] ([`Chunk::Bytes`]).
    Shared,
    /// Shared ASCII text, [`Body::SharedText`] ([`Chunk::Bytes`]).
    Text,
    /// A ropey rope, [`Body::Rope`] ([`Chunk::Rope`]).
    Rope,
    /// One-byte text, `é` (two bytes of UTF-8 each), [`Body::Transcoded`]
    /// ([`Chunk::Text`]).
    Latin1,
    /// Two-byte text, `€` (three bytes of UTF-8 each), [`Body::Transcoded`]
    /// ([`Chunk::Text`]).
    TwoByte,
}

impl Form {
    /// Every form.
    pub const ALL: [Form; 6] = [
        Form::Bytes,
        Form::Shared,
        Form::Text,
        Form::Rope,
        Form::Latin1,
        Form::TwoByte,
    ];

    /// Its name in the query.
    pub fn name(self) -> &'static str {
        match self {
            Form::Bytes => "bytes",
            Form::Shared => "shared",
            Form::Text => "text",
            Form::Rope => "rope",
            Form::Latin1 => "latin1",
            Form::TwoByte => "twobyte",
        }
    }

    /// Bytes of UTF-8 per character.
    pub fn width(self) -> usize {
        match self {
            Form::Latin1 => 2,
            Form::TwoByte => 3,
            _ => 1,
        }
    }

    /// The body of `len` characters, as its bytes on the wire.
    pub fn body(self, len: usize) -> Vec<u8> {
        self.text(0..len)
    }

    /// Characters `range` of the body, as their bytes on the wire.
    fn text(self, range: Range<usize>) -> Vec<u8> {
        match self {
            Form::Latin1 => "é".repeat(range.len()).into_bytes(),
            Form::TwoByte => "€".repeat(range.len()).into_bytes(),
            // The alphabet over and over: a body cut or shifted shows.
            _ => range.map(|i| b'a' + (i % 26) as u8).collect(),
        }
    }

    /// The body of `len` characters, made in this form.
    fn make(self, len: usize) -> Made {
        match self {
            Form::Bytes => Made::Bytes(self.body(len)),
            Form::Shared => Made::Shared(self.body(len).into()),
            Form::Text => Made::Text(self.body(len).into()),
            Form::Rope => {
                let text = String::from_utf8(self.body(len)).expect("ASCII");
                Made::Rope(ropey::Rope::from_str(&text))
            }
            Form::Latin1 => Made::Transcoded(Arc::new(Latin1(vec![0xe9u8; len])), 2 * len),
            Form::TwoByte => Made::Transcoded(Arc::new(Utf16(vec![0x20acu16; len])), 3 * len),
        }
    }

    /// Characters `range` of the body, made as one chunk in this form.
    fn chunk(self, range: Range<usize>) -> Chunk {
        match self {
            Form::Bytes | Form::Shared | Form::Text => Chunk::Bytes(self.text(range).into()),
            Form::Rope => {
                let text = String::from_utf8(self.text(range)).expect("ASCII");
                Chunk::Rope(ropey::Rope::from_str(&text))
            }
            Form::Latin1 => Chunk::Text(Arc::new(Latin1(vec![0xe9u8; range.len()]))),
            Form::TwoByte => Chunk::Text(Arc::new(Utf16(vec![0x20acu16; range.len()]))),
        }
    }
}

/// What `/n` asked for ([`Trivial`]'s options).
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// The body's form.
    pub form: Form,
    /// Its length in characters.
    pub len: usize,
    /// The status answered.
    pub status: Status,
    /// Whether the body is made by a job.
    pub later: bool,
    /// Whether a `HEAD` gets the length alone.
    pub unsent: bool,
    /// The chunks it is streamed in, if it is.
    pub chunks: Option<usize>,
    /// Whether the body is sent (not after a `HEAD`).
    pub sends: bool,
}

impl Plan {
    /// The body this plan asks for.
    fn make(self) -> Made {
        let sends_content = self.sends;
        let Plan {
            form, len, chunks, ..
        } = self;
        match chunks {
            Some(count) => Made::Stream {
                form,
                len,
                count,
                next: 0,
            },
            None if self.unsent && !sends_content => Made::Unsent(len * form.width()),
            None => form.make(len),
        }
    }
}

/// A `/n` body, made.
pub enum Made {
    /// [`Form::Bytes`].
    Bytes(Vec<u8>),
    /// [`Form::Shared`].
    Shared(Bytes),
    /// [`Form::Text`].
    Text(Bytes),
    /// [`Form::Rope`].
    Rope(ropey::Rope),
    /// [`Form::Latin1`] or [`Form::TwoByte`]: this many bytes of UTF-8.
    Transcoded(SharedRope, usize),
    /// The length of a body not made, for a `HEAD`.
    Unsent(usize),
    /// `len` characters in `form`, streamed in `count` chunks, of which
    /// `next` is the next to make.
    Stream {
        form: Form,
        len: usize,
        count: usize,
        next: usize,
    },
}

impl std::fmt::Debug for Made {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.body())
    }
}

impl Made {
    /// The body as the core takes it.
    fn body(&self) -> Body<'_> {
        match self {
            Made::Bytes(b) => Body::Bytes(b),
            Made::Shared(b) => Body::SharedBytes(b),
            Made::Text(b) => Body::SharedText(b),
            Made::Rope(r) => Body::Rope(r, r.len_bytes()),
            Made::Transcoded(r, len) => Body::Transcoded(r, *len),
            Made::Unsent(len) => Body::Unsent(*len),
            Made::Stream { .. } => Body::Stream,
        }
    }
}

/// What the service answers a request with.
#[derive(Debug)]
pub enum Answer {
    /// `/n`, not made yet.
    Make(Plan),
    /// `/n`, made.
    Made(Status, Made),
    /// `/echo`.
    Echo,
    /// `/refuse`.
    Refuse,
    /// Any other path.
    NotFound,
    /// A malformed `/n`, and why.
    Bad(&'static str),
}

impl Handler for Trivial {
    type Reply = Answer;

    fn call(&self, head: &RequestHead<'_>) -> Answer {
        match head.path {
            "/echo" => Answer::Echo,
            "/refuse" => Answer::Refuse,
            path => match path.strip_prefix("/n/") {
                Some(len) => self.plan(len, head.query, head.is_head()),
                None => Answer::NotFound,
            },
        }
    }
}

impl Reply for Answer {
    fn wants_body(&self) -> bool {
        matches!(self, Answer::Echo)
    }

    fn refuses(&self) -> bool {
        match self {
            Answer::Make(plan) => plan.status.code() >= 400,
            Answer::Refuse | Answer::Bad(_) => true,
            _ => false,
        }
    }

    fn prepare(&mut self, _: &[u8]) -> Option<Job<Answer>> {
        let Answer::Make(plan) = *self else {
            return None;
        };
        if plan.later {
            return Some(Job::new(
                async move { Answer::Made(plan.status, plan.make()) },
            ));
        }
        *self = Answer::Made(plan.status, plan.make());
        None
    }

    fn respond<'a>(
        &'a mut self,
        request_body: &'a [u8],
        _: &mut Fields<'a>,
    ) -> Result<Response<'a>, Full> {
        // A reply refused from its head is not prepared: made now.
        if let Answer::Make(plan) = *self {
            *self = Answer::Made(plan.status, plan.make());
        }
        let text = text_plain();
        Ok(match self {
            Answer::Made(status, made) => Response::with_lines(*status, text, made.body()),
            Answer::Echo => Response::with_lines(Status::OK, text, Body::Bytes(request_body)),
            Answer::Refuse => {
                Response::with_lines(Status::FORBIDDEN, text, Body::Bytes(b"refused\n"))
            }
            Answer::NotFound => {
                Response::with_lines(Status::NOT_FOUND, text, Body::Bytes(b"not found\n"))
            }
            Answer::Bad(why) => {
                Response::with_lines(Status::BAD_REQUEST, text, Body::Bytes(why.as_bytes()))
            }
            Answer::Make(_) => unreachable!("made above"),
        })
    }

    fn poll_chunk(&mut self, _: &mut Context<'_>) -> Poll<Result<Option<Chunk>, Full>> {
        let Answer::Made(
            _,
            Made::Stream {
                form,
                len,
                count,
                next,
            },
        ) = self
        else {
            return Poll::Ready(Ok(None));
        };
        if *next == *count {
            return Poll::Ready(Ok(None));
        }
        let at = |i: usize| i * *len / *count;
        let chunk = form.chunk(at(*next)..at(*next + 1));
        *next += 1;
        Poll::Ready(Ok(Some(chunk)))
    }
}

/// The chunked body at the start of `out`, decoded strictly (sizes in the
/// shortest upper-case hex, no extensions, no trailer fields): the size of
/// each chunk, the body, and the bytes it took; `None` when it is
/// malformed or cut short.
pub fn chunked(out: &[u8]) -> Option<(Vec<usize>, Vec<u8>, usize)> {
    let (mut sizes, mut body, mut at) = (Vec::new(), Vec::new(), 0);
    loop {
        let line = out[at..].windows(2).position(|w| w == b"\r\n")?;
        let digits = std::str::from_utf8(&out[at..at + line]).ok()?;
        let size = usize::from_str_radix(digits, 16).ok()?;
        if digits != format!("{size:X}") {
            return None;
        }
        at += line + 2;
        if out.get(at + size..at + size + 2)? != b"\r\n" {
            return None;
        }
        if size == 0 {
            return Some((sizes, body, at + 2));
        }
        sizes.push(size);
        body.extend_from_slice(&out[at..at + size]);
        at += size + 2;
    }
}
