//! A tokio HTTP/1.1 server that drains a `WriteQueue` with
//! `AsyncWriteExt::write_all_buf`: the queue is a `bytes::Buf` whose chunks
//! are its segments, so tokio hands them to the socket with vectored writes,
//! and nothing of the body is copied on the way.
//!
//! `cargo run -p unflat --example tokio_server -- --addr 127.0.0.1:3004`
//! (the flags every example takes: `--addr HOST:PORT`, port 0 for a free
//! one, or `--port PORT`), then:
//! - `curl http://127.0.0.1:3004/5000` — 5000 bytes of a ropey rope, sent
//!   from the rope's own chunks behind an encoded head;
//! - `curl http://127.0.0.1:3004/euro/5000` — 5000 `€` held as UTF-16 and
//!   encoded to UTF-8 a frame at a time as the socket drains
//!   (`WriteQueue::stream`), so the connection never holds the whole body.

#[path = "support/args.rs"]
mod args;

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::SystemTime;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use unflat::head::{DateLine, Head, Line, RequestMethod, Status};
use unflat::queue::{SharedRope, WriteQueue};
use unflat::{Encoding, Mode, Piece, Rope, Shape, Utf16};

/// The longest body served, in characters.
const MAX: usize = 1 << 20;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = args::addr_from_args("127.0.0.1:3004", |arg, _| {
        Err(format!("unknown argument {arg:?}"))
    })
    .unwrap_or_else(|e| {
        eprintln!("tokio_server: {e}; usage: tokio_server [--addr HOST:PORT | --port PORT]");
        std::process::exit(2)
    });
    let listener = TcpListener::bind(&addr).await?;
    println!("tokio_server at http://{}/", listener.local_addr()?);
    // The bodies every response slices: built once, shared by every task.
    let text = ropey::Rope::from_str(&"unflat ".repeat(MAX / 7 + 1));
    let euro: Arc<[u16]> = vec![0x20AC_u16; MAX].into();
    loop {
        let (stream, _) = listener.accept().await?;
        let (text, euro) = (text.clone(), euro.clone());
        tokio::spawn(async move {
            if let Err(e) = serve(stream, &text, &euro).await {
                eprintln!("connection: {e}");
            }
        });
    }
}

/// Serves keep-alive requests on one connection until the peer closes it.
async fn serve(
    mut stream: TcpStream,
    text: &ropey::Rope,
    euro: &Arc<[u16]>,
) -> std::io::Result<()> {
    let plain = Line::parse("Content-Type", "text/plain; charset=utf-8").expect("a valid line");
    let mut input = Vec::new();
    let mut queue = WriteQueue::new();
    loop {
        // Read until a whole head is in; this example takes no bodies.
        let (used, target) = loop {
            let mut fields = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut fields);
            match req.parse(&input) {
                Ok(httparse::Status::Complete(n)) => break (n, req.path.unwrap_or("").to_owned()),
                Ok(httparse::Status::Partial) => {
                    if stream.read_buf(&mut input).await? == 0 {
                        return Ok(());
                    }
                }
                Err(e) => return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
            }
        };
        input.drain(..used);

        // `/{n}`: n bytes of the rope; `/euro/{n}`: n euro signs.
        let count = |s: &str| s.parse::<usize>().ok().filter(|&n| n <= MAX);
        let date = DateLine::at(SystemTime::now());
        let mut head = Head::new(Status::OK, RequestMethod::Other);
        head.line(&plain).expect("room for a line").date(&date);
        if let Some(n) = target.strip_prefix("/euro/").and_then(count) {
            let part: SharedRope = Arc::new(Prefix(euro.clone(), n));
            head.content_length(3 * n as u64).expect("one framing");
            queue.head(&head).expect("its lines are checked when built");
            queue
                .stream(&part, Encoding::Utf8, Mode::Strict)
                .expect("utf8 refuses nothing");
        } else if let Some(n) = target.strip_prefix('/').and_then(count) {
            head.content_length(n as u64).expect("one framing");
            queue.head(&head).expect("its lines are checked when built");
            queue.share_rope(text, 0..n);
        } else {
            let mut head = Head::new(Status::NOT_FOUND, RequestMethod::Other);
            head.date(&date).content_length(0).expect("one framing");
            queue.head(&head).expect("its lines are checked when built");
        }
        queue.end_response();
        // The queue is a `Buf`: tokio writes its chunks with `writev` until
        // it is empty, resuming at its cursor after partial writes.
        stream.write_all_buf(&mut queue).await?;
    }
}

/// The first `n` code units of shared UTF-16 text: a rope the queue can
/// keep while it streams it, without copying the text.
struct Prefix(Arc<[u16]>, usize);

impl Rope for Prefix {
    fn for_each_piece<'a>(
        &'a self,
        visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        visit(Piece::TwoByte(&self.0[..self.1]))
    }

    fn shape(&self) -> Shape {
        Utf16(&self.0[..self.1]).shape()
    }
}
