//! One connection's IO: reading requests, writing the queue, timeouts.
//!
//! Buffering: requests are read into one reusable [`BytesMut`]; the
//! [`Session`] consumes them and queues responses on a [`WriteQueue`]. After
//! every batch — everything one read brought in, pipelined requests
//! included — the queue is written with `write_vectored`, as many iovecs per
//! call as it has (up to `IOV_MAX`), so a batch whose responses the socket
//! takes goes out in one system call. A partial write leaves the rest in the
//! queue, by reference, and the next call resumes at the cursor.
//!
//! Fairness: a batch that copies or encodes more than a turn
//! ([`crate::session::TURN`], 64 KiB) is written a turn at a time, and a
//! write longer than 256 KiB (`YIELD_AFTER`) lets the worker's other connections
//! run in between, so that clients pipelining long bodies — or reading one
//! as fast as it comes — cannot keep a worker from the others (a
//! `/healthz` among a thousand such clients waited up to 2 to 3 s; see
//! docs/robustness.md).
//!
//! Memory: the read buffer grows only once the session's lease covers it
//! (a connection that cannot grow it is answered 503 and closed), and the
//! lease covers what a TLS socket may hold of each write
//! ([`Socket::send_memory`]) before the write begins; see
//! [`crate::memory`].
//!
//! Timeouts cost little per request: the connection has **one** timer,
//! moved to each new deadline (tokio moves a timer to a later deadline
//! without touching its wheel), and a write arms it only when the socket
//! cannot take the bytes at once. The shutdown future is pinned once
//! ([`Shutdown::stopped`]).
//!
//! Writes use `sendmsg` rather than `writev` ([`Socket`]): for a socket the
//! two do the same, and `sendmsg` skips the file layer's work per call
//! (docs/design.md has the measurement).
//!
//! The connection is generic over its IO, so tests drive it with in-memory
//! sockets that count calls.

use std::future::{poll_fn, Future};
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};
use unflat::queue::{WriteQueue, IOV_MAX};

use crate::memory::{Full, Lease};
use crate::session::{Session, Step, Waiting};
use crate::shutdown::Shutdown;
use crate::App;

/// Bytes the input buffer is allocated with, and grows by when full.
pub const READ_CHUNK: usize = 16 * 1024;

/// Bytes a connection writes in one go before it lets the other tasks of
/// its worker run: a peer that reads a long body as fast as it comes would
/// otherwise keep the worker for the whole body.
const YIELD_AFTER: usize = 256 << 10;

/// iovecs tried first per `write_vectored`.
const FEW_IOVECS: usize = 64;

/// Why a connection ended, when it was not a clean close.
#[derive(Debug)]
pub enum Ended {
    /// The peer did not take a write for `--send-timeout`: its socket
    /// buffer is full of unsent data, which the caller should discard
    /// (reset the connection) rather than leave to drain.
    SendTimeout,
    /// Any other IO error.
    Io(io::Error),
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ended::SendTimeout => f.write_str("send timeout: the peer stopped reading"),
            Ended::Io(e) => e.fmt(f),
        }
    }
}

impl From<io::Error> for Ended {
    fn from(e: io::Error) -> Ended {
        Ended::Io(e)
    }
}

/// What a connection reads from and writes to. A vectored write defaults to
/// `poll_write_vectored`; a TCP stream sends with `sendmsg`.
pub trait Socket: AsyncRead + AsyncWrite + Unpin {
    /// Writes the slices, in order, as one call; how many bytes were taken.
    fn poll_send_vectored(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(self).poll_write_vectored(cx, bufs)
    }

    /// The peer's address, for the access log (`None`: unknown).
    fn peer_addr(&self) -> Option<SocketAddr> {
        None
    }

    /// Bytes the socket's own buffers may hold beyond what a write adds
    /// ([`Socket::send_memory`]): for TLS, records being read and one
    /// record being written. Counted against the connection's lease from
    /// its start.
    fn fixed_memory(&self) -> usize {
        0
    }

    /// Bytes the socket may hold of a write of `pending` bytes, beyond its
    /// fixed memory (TLS: the encrypted records the peer has not taken).
    fn send_memory(&self, _pending: usize) -> usize {
        0
    }

    /// Bounds what the socket holds of the next write to `bytes` beyond its
    /// fixed memory: what the lease covers.
    fn limit_send_memory(&mut self, _bytes: usize) {}
}

impl Socket for TcpStream {
    fn poll_send_vectored(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.poll_write_ready(cx))?;
            let sent = self.try_io(Interest::WRITABLE, || {
                socket2::SockRef::from(&*self).send_vectored_with_flags(bufs, libc::MSG_NOSIGNAL)
            });
            match sent {
                // Readiness was stale; `try_io` cleared it, so the next poll
                // waits for the socket.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                done => return Poll::Ready(done),
            }
        }
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        TcpStream::peer_addr(self).ok()
    }
}

/// The lease of a connection, its base covering what it needs before it
/// reads a byte: its read buffer, the socket's `socket` bytes of own
/// buffers, a write buffer for a small response.
pub fn lease(app: &App, socket: usize) -> Lease {
    Lease::open(&app.memory, Session::base_memory(app, READ_CHUNK, socket))
}

/// Serves one connection until the peer closes it, a response closes it, a
/// timeout expires, or the server shuts down; its memory on `lease`
/// ([`lease`]).
pub async fn serve<S: Socket>(
    io: &mut S,
    app: &App,
    shutdown: &Shutdown,
    lease: Lease,
) -> Result<(), Ended> {
    let config = &app.config;
    let mut input = BytesMut::with_capacity(READ_CHUNK);
    let mut queue = WriteQueue::with_policy(config.policy());
    let mut session = Session::open(app, lease, input.capacity(), io.fixed_memory());
    // The read buffer's whole allocation: `input.capacity()` shrinks as
    // requests are consumed from its front.
    let mut read_buffer = input.capacity();
    if config.access_log {
        if let Some(peer) = io.peer_addr() {
            session.set_peer(peer);
        }
    }
    let timer = tokio::time::sleep(config.idle_timeout);
    tokio::pin!(timer);
    let stopped = shutdown.stopped();
    tokio::pin!(stopped);
    let mut deadlines = Deadlines::default();
    loop {
        let step = session.process(&mut input, &mut queue, app);
        write(io, &mut queue, &mut session, app, timer.as_mut()).await?;
        let waiting = match step {
            Step::Flush => {
                // A turn's worth written (or the queue full): the other
                // connections of this worker go first, so that a client
                // that pipelines long bodies cannot keep the worker.
                tokio::task::yield_now().await;
                continue;
            }
            Step::Close => break,
            Step::Defer(job) => {
                // The body it waits for is built on the blocking pool; this
                // task waits without holding a worker.
                session.resume(job.run().await);
                continue;
            }
            Step::Read(w) => w,
        };
        if shutdown.is_triggered() {
            // Every response begun is written; requests not yet complete are
            // not started.
            break;
        }
        let deadline = deadlines.next(waiting, session.served(), config);
        timer.as_mut().reset(deadline);
        if input.capacity() - input.len() < READ_CHUNK / 4 {
            let grown = room_to_read(&mut input, &mut read_buffer, &mut session, &queue);
            if let Err(full) = grown {
                session.no_room_to_read(&input, &mut queue, app, full);
                write(io, &mut queue, &mut session, app, timer.as_mut()).await?;
                break;
            }
        }
        let read = tokio::select! {
            biased;
            read = io.read_buf(&mut input) => Some(read),
            () = timer.as_mut() => None,
            () = stopped.as_mut(), if waiting == Waiting::Idle => break,
        };
        match read {
            Some(Ok(0)) => break, // the peer closed its side
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e.into()),
            None => {
                // A head or a body that did not arrive in time is answered
                // 408; an idle connection is closed without a word.
                if waiting != Waiting::Idle {
                    session.timed_out(&input, &mut queue, app);
                    write(io, &mut queue, &mut session, app, timer.as_mut()).await?;
                }
                break;
            }
        }
    }
    // Best effort: the peer may already be gone.
    let _ = io.shutdown().await;
    Ok(())
}

/// Makes room for the next read in `input`, whose whole allocation is
/// `read_buffer` bytes, the session's lease covering any growth first.
///
/// When what is unread fits the allocation and is no longer than what was
/// consumed, `BytesMut::reserve` moves it to the front and allocates
/// nothing (it is the buffer's only owner). Otherwise the unread bytes are
/// copied into a new buffer of a size chosen here — the need, or twice the
/// old, whichever is larger — so that the allocation is known exactly
/// rather than left to `BytesMut`'s own growth, which keeps the consumed
/// front. Should the reuse allocate after all, the most it can hold is
/// covered after the fact, or the connection refused (and closed).
fn room_to_read(
    input: &mut BytesMut,
    read_buffer: &mut usize,
    session: &mut Session,
    queue: &WriteQueue,
) -> Result<(), Full> {
    let consumed = read_buffer.saturating_sub(input.capacity());
    let reuses = input.len() + READ_CHUNK <= *read_buffer && consumed >= input.len();
    if reuses {
        input.reserve(READ_CHUNK);
        if input.capacity() != *read_buffer {
            *read_buffer = consumed + input.capacity();
            session.grow_read_buffer(queue, *read_buffer)?;
        }
        return Ok(());
    }
    let grown = (input.len() + READ_CHUNK).max(2 * *read_buffer);
    session.grow_read_buffer(queue, grown)?;
    let mut fresh = BytesMut::with_capacity(grown);
    fresh.extend_from_slice(input);
    *input = fresh;
    *read_buffer = input.capacity();
    session.grow_read_buffer(queue, *read_buffer)
}

/// Writes the queue whole ([`flush`]), the socket's memory for it covered
/// first; counts the bytes the socket took, and settles the session's
/// lease after.
async fn write<S: Socket>(
    io: &mut S,
    queue: &mut WriteQueue,
    session: &mut Session,
    app: &App,
    timer: Pin<&mut Sleep>,
) -> Result<(), Ended> {
    let queued = queue.remaining();
    if queued > 0 {
        let want = io.send_memory(queued);
        // Not covered: the socket holds no more than its fixed memory (one
        // record), and the write goes out in smaller pieces.
        let granted = match want {
            0 => 0,
            _ => session.cover_sending(queue, want).map_or(0, |()| want),
        };
        io.limit_send_memory(granted);
    }
    let flushed = flush(io, queue, app.config.send_timeout, timer).await;
    app.metrics.written(queued - queue.remaining());
    flushed?;
    session.settle(queue);
    Ok(())
}

/// When the head and the body being read began to arrive, each with the
/// count of requests answered then: a head or a body that follows another
/// answered request is a new one, with a deadline of its own. For the
/// body, also when its payload last grew.
#[derive(Debug, Default)]
struct Deadlines {
    head: Option<(u64, Instant)>,
    body: Option<(u64, Instant)>,
    /// Payload bytes of the body as last seen, and when they last grew.
    progress: (u64, Option<Instant>),
}

impl Deadlines {
    /// The deadline for what the session is waiting for.
    ///
    /// - idle: `--idle-timeout` from now;
    /// - a head: `--head-timeout` from its first byte;
    /// - a body (trailers included): `--body-timeout` from the end of its
    ///   head, plus a second for every `--body-min-rate` bytes of payload
    ///   received (Apache's `mod_reqtimeout` `body=…,MinRate=…`) — and
    ///   never more than `--body-timeout` after the payload last grew. A
    ///   timer restarted on every read, as nginx's `client_body_timeout`
    ///   is, would let one byte per timeout hold a connection forever;
    ///   credit alone would let a client that sent a large body fast buy
    ///   as long a silence. Framing earns nothing.
    fn next(&mut self, waiting: Waiting, served: u64, config: &crate::Config) -> Instant {
        let now = Instant::now();
        let began = |slot: &mut Option<(u64, Instant)>| match *slot {
            Some((n, t)) if n == served => t,
            _ => slot.insert((served, now)).1,
        };
        match waiting {
            Waiting::Idle => now + config.idle_timeout,
            Waiting::Head => began(&mut self.head) + config.head_timeout,
            Waiting::Body { payload } => {
                let start = began(&mut self.body);
                let grew = match self.progress {
                    (seen, Some(at)) if start <= at && seen == payload => at,
                    _ => {
                        self.progress = (payload, Some(now));
                        now
                    }
                };
                (start + config.body_deadline(payload)).min(grew + config.body_timeout)
            }
        }
    }
}

/// Writes the whole queue, one `write_vectored` per iteration, then flushes
/// the socket (a TLS stream holds encrypted records the socket did not
/// take; a TCP stream holds nothing), failing when a call makes no progress
/// for `send_timeout`. `timer` is armed only when the socket cannot take a
/// write at once.
pub async fn flush<S: Socket>(
    io: &mut S,
    queue: &mut WriteQueue,
    send_timeout: Duration,
    mut timer: Pin<&mut Sleep>,
) -> Result<(), Ended> {
    let mut since_yield = 0;
    while queue.has_remaining() {
        let written = in_time(send_timeout, timer.as_mut(), |cx| {
            poll_write(&mut *io, queue, cx)
        })
        .await?;
        match written {
            0 => return Err(io::Error::from(io::ErrorKind::WriteZero).into()),
            n => queue.advance(n),
        }
        since_yield += written;
        if since_yield >= YIELD_AFTER && queue.has_remaining() {
            since_yield = 0;
            tokio::task::yield_now().await;
        }
    }
    in_time(send_timeout, timer, |cx| Pin::new(&mut *io).poll_flush(cx)).await
}

/// Polls `op` until it is ready, failing with [`Ended::SendTimeout`] when it
/// stays pending for `send_timeout`; arms `timer` only then.
async fn in_time<T>(
    send_timeout: Duration,
    mut timer: Pin<&mut Sleep>,
    mut op: impl FnMut(&mut Context<'_>) -> Poll<io::Result<T>>,
) -> Result<T, Ended> {
    let mut armed = false;
    poll_fn(|cx| {
        if let Poll::Ready(r) = op(cx) {
            return Poll::Ready(r.map_err(Ended::from));
        }
        if !armed {
            timer.as_mut().reset(Instant::now() + send_timeout);
            armed = true;
        }
        timer.as_mut().poll(cx).map(|()| Err(Ended::SendTimeout))
    })
    .await
}

/// One vectored write of the queue's pending bytes. The iovec arrays live on
/// the stack of this poll only, never in the connection's future. Most
/// batches need a few slices; the IOV_MAX array (16 KiB to initialise) only
/// when they need more.
fn poll_write<S: Socket>(
    io: &mut S,
    queue: &WriteQueue,
    cx: &mut Context<'_>,
) -> Poll<io::Result<usize>> {
    let mut few = [IoSlice::new(&[]); FEW_IOVECS];
    let n = queue.chunks_vectored(&mut few);
    if n < FEW_IOVECS {
        return io.poll_send_vectored(cx, &few[..n]);
    }
    let mut many = [IoSlice::new(&[]); IOV_MAX];
    let n = queue.chunks_vectored(&mut many);
    io.poll_send_vectored(cx, &many[..n])
}
