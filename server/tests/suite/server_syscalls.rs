//! System calls per batch, counted on an in-memory socket: the connection is
//! generic over its IO ([`net::Socket`]), so a fake socket that takes
//! every byte shows how many vectored writes a batch of pipelined responses
//! costs (on a TCP stream, each is one `sendmsg`). The connection serves
//! the trivial service of `common/trivial.rs`: what is counted is the
//! core's.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::common::trivial::{Form, Trivial};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use unflat_server::net::{self, shutdown};
use unflat_server::session::TURN;
use unflat_server::{Stack, Strategy};

/// Hands out `input` in one read, then end of stream; takes every write
/// whole and counts the calls.
struct FakeSocket {
    input: Vec<u8>,
    reads: usize,
    vectored_writes: usize,
    plain_writes: usize,
    iovecs: Vec<usize>,
    output: Vec<u8>,
}

impl FakeSocket {
    fn new(input: Vec<u8>) -> FakeSocket {
        FakeSocket {
            input,
            reads: 0,
            vectored_writes: 0,
            plain_writes: 0,
            iovecs: Vec::new(),
            output: Vec::new(),
        }
    }
}

impl FakeSocket {
    /// Write calls of either kind.
    fn writes(&self) -> usize {
        self.vectored_writes + self.plain_writes
    }
}

impl net::Socket for FakeSocket {}

impl AsyncRead for FakeSocket {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.reads += 1;
        let n = self.input.len().min(buf.remaining());
        let chunk: Vec<u8> = self.input.drain(..n).collect();
        buf.put_slice(&chunk);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for FakeSocket {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.plain_writes += 1;
        self.iovecs.push(1);
        self.output.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.vectored_writes += 1;
        self.iovecs.push(bufs.len());
        let mut n = 0;
        for b in bufs {
            self.output.extend_from_slice(b);
            n += b.len();
        }
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

fn app(strategy: Strategy) -> Stack<Trivial> {
    Stack::with_service(
        crate::common::config(strategy),
        "127.0.0.1:0".parse().unwrap(),
        None,
        |_| Trivial::new(crate::common::TRIVIAL_LONGEST),
    )
}

/// `lens` requests for shared ASCII text (the demo's `/end-string` form).
fn pipelined(lens: &[usize]) -> Vec<u8> {
    pipelined_in(lens, Form::Text)
}

/// `lens` requests for bodies in `form`.
fn pipelined_in(lens: &[usize], form: Form) -> Vec<u8> {
    lens.iter()
        .flat_map(|len| {
            let name = form.name();
            format!("GET /n/{len}?form={name} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes()
        })
        .collect()
}

async fn run(app: &Stack<Trivial>, input: Vec<u8>) -> FakeSocket {
    let mut socket = FakeSocket::new(input);
    let (_trigger, shutdown) = shutdown::channel();
    let lease = net::lease(app.connections(), 0);
    net::serve(&mut socket, None, app.connections(), &shutdown, lease)
        .await
        .unwrap();
    socket
}

fn bodies(output: &[u8]) -> Vec<usize> {
    let mut buf = output.to_vec();
    let mut lens = Vec::new();
    while !buf.is_empty() {
        let r = crate::common::read_response(&mut io::empty(), &mut buf, false).unwrap();
        assert_eq!(r.body, Form::Text.body(r.body.len()));
        lens.push(r.body.len());
    }
    lens
}

#[tokio::test]
async fn one_write_call_per_batch_of_pipelined_responses() {
    for (strategy, form) in [
        (Strategy::Direct, Form::Text),
        (Strategy::Direct, Form::Rope),
        (Strategy::Flatten, Form::Text),
    ] {
        let app = app(strategy);
        // 60 responses, small ones copied behind their heads and large ones
        // as iovecs at their own memory (one buffer): one call. Where the
        // large ones are copied too (a rope's short chunks, the flatten
        // strategy), one call per turn of 64 KiB copied (session::TURN),
        // after which the connection lets others run.
        let lens: Vec<usize> = (0..60)
            .map(|i| if i % 10 == 0 { 40_000 } else { i * 17 })
            .collect();
        let socket = run(&app, pipelined_in(&lens, form)).await;
        let turns = if strategy == Strategy::Direct && form == Form::Text {
            1
        } else {
            socket.output.len().div_ceil(TURN)
        };
        assert!(
            socket.writes() <= turns,
            "{strategy:?} {form:?}: {} calls for {} bytes, iovecs per call {:?}",
            socket.writes(),
            socket.output.len(),
            socket.iovecs
        );
        assert_eq!(
            bodies(&socket.output),
            lens,
            "{strategy:?}: every response, in order"
        );
    }
}

#[tokio::test]
async fn small_responses_are_one_contiguous_iovec() {
    let app = app(Strategy::Direct);
    let socket = run(&app, pipelined(&[1024; 50])).await;
    assert_eq!((socket.writes(), socket.iovecs.as_slice()), (1, &[1][..]));
}

#[tokio::test]
async fn backpressure_splits_a_batch_at_the_response_limit() {
    // --max-queued-responses 64: a batch of 100 goes out as 64 + 36.
    let app = app(Strategy::Direct);
    let socket = run(&app, pipelined(&[10; 100])).await;
    assert_eq!(socket.writes(), 2);
    assert_eq!(bodies(&socket.output), vec![10; 100]);
}
