//! One connection, read to write: requests read into one buffer, handed
//! to the [`Session`], the responses it queued written with
//! `write_vectored`.
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
//! as fast as it comes — cannot keep a worker from the others (measured in
//! docs/robustness.md, "Memory: one account": a normal client while builds
//! are pipelined).
//!
//! Memory: the read buffer grows only once the session's lease covers it
//! (a connection that cannot grow it is answered 503 and closed), and the
//! lease covers what a TLS socket may hold of each write
//! ([`Socket::send_memory`]) before the write begins; see
//! [`crate::memory`].
//!
//! Idle: a connection waiting for its next request, with nothing unread
//! and nothing queued, puts its read and write buffers away (`idle.rs`)
//! until the socket is readable, and holds only its task and its state.
//!
//! Timeouts cost little per request: the connection has **one** timer
//! (`timers.rs`: no tokio timer, and no time driver in the runtime),
//! moved only when a deadline comes earlier than it is set for (the
//! deadlines, and why, are `deadlines.rs`'s), and a write arms it only when
//! the socket cannot take the bytes at once. The shutdown future is pinned
//! once ([`Shutdown::stopped`]).
//!
//! The connection is generic over its IO, so tests drive it with in-memory
//! sockets that count calls.

use std::future::{poll_fn, Future};
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tracing::debug;
use unflat::queue::WriteQueue;

use super::deadlines::{in_time, Deadlines};
use super::give_way::Registration;
use super::idle;
use super::shutdown::{Shutdown, Stopped};
use super::timers::Timer;
use super::tls::{self, Tls, TlsSocket};
use super::{Connections, Ended, Socket, READ_CHUNK};
use crate::clock::Moment;
use crate::memory::{Full, Lease};
use crate::session::{Service, Session, Step, Waiting};

/// Bytes a connection writes in one go before it lets the other tasks of
/// its worker run: a peer that reads a long body as fast as it comes would
/// otherwise keep the worker for the whole body.
const YIELD_AFTER: usize = 256 << 10;

/// iovecs tried first per `write_vectored`.
const FEW_IOVECS: usize = 8;

/// Linux's `UIO_MAXIOV` (and macOS's `IOV_MAX`): the most slices one
/// `writev` takes; a longer array would be filled for nothing.
const IOV_MAX: usize = 1024;

/// The lease of a connection, its base covering what it needs before it
/// reads a byte: its read buffer, the socket's `socket` bytes of own
/// buffers, a write buffer for a small response.
pub fn lease<S: Service>(connections: &Connections<S>, socket: usize) -> Lease {
    let protocol = &connections.protocol;
    Lease::open(
        &protocol.memory,
        Session::base_memory(protocol, READ_CHUNK, socket),
    )
}

/// Serves one accepted connection, over TLS when there is an acceptor (the
/// handshake first, within `--handshake-timeout`), on a lease of the
/// memory account whose base covers the TLS session's buffers from before
/// the handshake. After a send timeout the connection is reset rather than
/// closed, as nginx's `reset_timedout_connection` does: the kernel then
/// discards the unsent bytes at once instead of holding them for a peer
/// that does not read.
pub async fn handle<S: Service>(
    stream: TcpStream,
    peer: SocketAddr,
    tls: Option<&Tls>,
    connections: &Connections<S>,
    shutdown: &Shutdown,
) {
    let _open = connections.transport.open();
    let lease = lease(connections, tls.map_or(0, |t| t.fixed_memory));
    let ended = match tls {
        None => {
            let mut stream = stream;
            let ended = serve(&mut stream, Some(peer), connections, shutdown, lease).await;
            (ended, stream)
        }
        // Boxed: a TLS connection's state (the handshake, rustls's
        // session) is large, and a cleartext connection's task would
        // otherwise be as large as it.
        Some(tls) => {
            match Box::pin(serve_tls(stream, peer, tls, connections, shutdown, lease)).await {
                Some(ended) => ended,
                None => return,
            }
        }
    };
    match ended {
        (Ok(()), _) => {}
        (Err(Ended::SendTimeout), tcp) => {
            debug!(%peer, "send timeout: resetting the connection");
            connections.transport.send_timed_out();
            let _ = tcp.set_zero_linger();
        }
        (Err(e), _) => debug!(%peer, "connection ended: {e}"),
    }
}

/// Serves one TLS connection: the handshake within `--handshake-timeout`,
/// then [`serve`]; what it ended with and its TCP stream, or `None` when
/// the handshake did not complete.
async fn serve_tls<S: Service>(
    stream: TcpStream,
    peer: SocketAddr,
    tls: &Tls,
    connections: &Connections<S>,
    shutdown: &Shutdown,
    lease: Lease,
) -> Option<(Result<(), Ended>, TcpStream)> {
    let timeout = connections.timeouts.handshake;
    let stream = tls::handshake(&tls.acceptor, stream, peer, timeout).await?;
    let mut socket = TlsSocket {
        stream,
        fixed_memory: tls.fixed_memory,
    };
    let ended = serve(&mut socket, Some(peer), connections, shutdown, lease).await;
    Some((ended, socket.stream.into_inner().0))
}

/// Serves one connection, from `peer` when known, until the peer closes
/// it, a response closes it, a timeout expires, or the server shuts down;
/// its memory on `lease` ([`lease`]).
pub async fn serve<S: Service, IO: Socket>(
    io: &mut IO,
    peer: Option<SocketAddr>,
    connections: &Connections<S>,
    shutdown: &Shutdown,
    lease: Lease,
) -> Result<(), Ended> {
    let mut c = Connection::open(io, peer, connections, lease);
    let registration = connections.idle.register();
    let timer = Timer::new();
    let stopped = shutdown.stopped();
    tokio::pin!(stopped);
    let mut deadlines = Deadlines::default();
    loop {
        let step = c
            .session
            .process(&mut c.input, &mut c.queue, &connections.protocol);
        c.write(&timer).await?;
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
                c.session.resume(job.run().await);
                continue;
            }
            Step::Read(w) => w,
        };
        if shutdown.is_triggered() {
            // Every response begun is written; requests not yet complete are
            // not started.
            break;
        }
        let served = c.session.served();
        let deadline = deadlines.next(waiting, served, &connections.timeouts);
        timer.arm(deadline);
        // Between requests, at the connection limit, it gives way.
        let idle = waiting == Waiting::Idle;
        if idle {
            registration.idle(deadline);
        }
        let read = c.read(waiting, deadline, &timer, &registration, stopped.as_mut());
        let read = read.await;
        if idle {
            registration.busy();
        }
        match read? {
            Got::More => {}
            Got::End => break,
            Got::Answered => {
                // Written here rather than inside `read`, so that the
                // connection's future holds one write's state, not two.
                c.write(&timer).await?;
                break;
            }
        }
    }
    // Best effort: the peer may already be gone. Within the send timeout
    // like any write: a TLS close_notify waits for the socket, which a
    // peer that stopped reading never makes writable.
    let send = connections.timeouts.send;
    let closed = in_time(send, &timer, &mut *c.io, |io, cx| {
        Pin::new(io).poll_shutdown(cx)
    });
    match closed.await {
        Err(Ended::SendTimeout) => Err(Ended::SendTimeout),
        _ => Ok(()),
    }
}

/// What a read got.
enum Got {
    /// Bytes arrived.
    More,
    /// The connection ends without a word: the peer closed its side, it
    /// was idle past its deadline, or the server is stopping.
    End,
    /// The connection ends with the answer the session queued (408: a head
    /// or a body late; 503: no room to read), once it is written.
    Answered,
}

/// A connection being served: its socket, its buffers, its session.
struct Connection<'a, S: Service, IO> {
    io: &'a mut IO,
    connections: &'a Connections<S>,
    /// Requests read and not yet consumed.
    input: BytesMut,
    /// The read buffer's whole allocation: `input.capacity()` shrinks as
    /// requests are consumed from its front.
    read_buffer: usize,
    queue: WriteQueue,
    session: Session<S>,
    /// Whether the queue had a frame buffer when it was put away.
    had_frame: bool,
}

impl<'a, S: Service, IO: Socket> Connection<'a, S, IO> {
    /// A connection on `io` from `peer` before its first read, its memory
    /// on `lease`.
    fn open(
        io: &'a mut IO,
        peer: Option<SocketAddr>,
        connections: &'a Connections<S>,
        lease: Lease,
    ) -> Self {
        let (input, _) = idle::take_out();
        let (read_buffer, socket) = (input.capacity(), io.fixed_memory());
        let session = Session::open(&connections.protocol, lease, read_buffer, socket, peer);
        Connection {
            io,
            connections,
            read_buffer: input.capacity(),
            input,
            queue: WriteQueue::with_policy(connections.policy),
            session,
            had_frame: false,
        }
    }

    /// Reads more of what the session is `waiting` for, by `deadline`
    /// (`timer` armed for it); or says why the connection is to end
    /// ([`Read`]): the peer closed its side, the deadline passed (a head or
    /// a body late is answered 408), the read buffer could not grow (503),
    /// or the server is stopping while the connection is idle.
    async fn read(
        &mut self,
        waiting: Waiting,
        deadline: Moment,
        timer: &Timer,
        registration: &Registration<'_>,
        mut stopped: Pin<&mut Stopped<'_>>,
    ) -> Result<Got, Ended> {
        let service = &self.connections.protocol;
        if IO::READY_WITHOUT_BUFFER
            && waiting == Waiting::Idle
            && self.input.is_empty()
            && !self.queue.has_remaining()
        {
            // Nothing unread, nothing queued: the buffers wait in the pool.
            self.put_buffers_away();
            let io = &mut *self.io;
            let ready = poll_fn(|cx| {
                if let Poll::Ready(ready) = io.poll_read_ready(cx) {
                    return Poll::Ready(Some(ready));
                }
                if timer.poll_passed(deadline, cx).is_ready()
                    || stopped.as_mut().poll(cx).is_ready()
                    || registration.poll_asked(cx).is_ready()
                {
                    return Poll::Ready(None);
                }
                Poll::Pending
            })
            .await;
            self.take_buffers_out();
            match ready {
                Some(ready) => ready?,
                None => return Ok(Got::End),
            }
        }
        if self.input.capacity() - self.input.len() < READ_CHUNK / 4 {
            if let Err(full) = self.room_to_read() {
                let (input, queue) = (&self.input, &mut self.queue);
                self.session.no_room_to_read(input, queue, service, full);
                return Ok(Got::Answered);
            }
        }
        let read = tokio::select! {
            biased;
            read = self.io.read_buf(&mut self.input) => Some(read),
            () = timer.passed(deadline) => None,
            () = stopped, if waiting == Waiting::Idle => return Ok(Got::End),
            () = registration.asked(), if waiting == Waiting::Idle => return Ok(Got::End),
        };
        match read {
            Some(Ok(0)) => Ok(Got::End), // the peer closed its side
            Some(Ok(_)) => Ok(Got::More),
            Some(Err(e)) => Err(e.into()),
            None => {
                // A head or a body that did not arrive in time is answered
                // 408; an idle connection is closed without a word.
                if waiting == Waiting::Idle {
                    return Ok(Got::End);
                }
                let (input, queue) = (&self.input, &mut self.queue);
                self.session.timed_out(input, queue, service);
                Ok(Got::Answered)
            }
        }
    }

    /// Puts the empty read buffer and the empty queue's buffer and lists away
    /// (`idle.rs`). A read buffer that had grown is freed, and the lease
    /// then covers a buffer of the first size again.
    fn put_buffers_away(&mut self) {
        let input = std::mem::take(&mut self.input);
        let read = if self.read_buffer == READ_CHUNK {
            Some(input)
        } else {
            // Grown: freed, and the next one is of the first size.
            drop(input);
            self.read_buffer = READ_CHUNK;
            // Smaller than what the lease covers: cannot fail.
            let _ = self.session.grow_read_buffer(&self.queue, READ_CHUNK);
            None
        };
        let frame = self.queue.take_frame_buffer();
        self.had_frame = frame.is_some();
        idle::put_away(idle::Buffers {
            read,
            write: self.queue.take_spare(),
            frame,
        });
    }

    /// Takes a read buffer, and a queue's spare if the pool has one, out of
    /// the pool for the request that is arriving; and a frame buffer for a
    /// connection that had one (it streams bodies).
    fn take_buffers_out(&mut self) {
        let (input, write) = idle::take_out();
        self.input = input;
        if let Some(spare) = write {
            self.queue.reuse_spare(spare);
        }
        if self.had_frame {
            if let Some(frame) = idle::take_frame() {
                self.queue.reuse_frame_buffer(frame);
            }
        }
    }

    /// Makes room for the next read in the input buffer, the session's
    /// lease covering any growth first.
    ///
    /// When what is unread fits the allocation and is no longer than what
    /// was consumed, `BytesMut::reserve` moves it to the front and
    /// allocates nothing (it is the buffer's only owner). Otherwise the
    /// unread bytes are copied into a new buffer of a size chosen here —
    /// the need, or twice the old, whichever is larger — so that the
    /// allocation is known exactly rather than left to `BytesMut`'s own
    /// growth, which keeps the consumed front. Should the reuse allocate
    /// after all, the most it can hold is covered after the fact, or the
    /// connection refused (and closed).
    fn room_to_read(&mut self) -> Result<(), Full> {
        let (input, session, queue) = (&mut self.input, &mut self.session, &self.queue);
        let consumed = self.read_buffer.saturating_sub(input.capacity());
        let reuses = input.len() + READ_CHUNK <= self.read_buffer && consumed >= input.len();
        if reuses {
            input.reserve(READ_CHUNK);
            if input.capacity() != self.read_buffer {
                self.read_buffer = consumed + input.capacity();
                session.grow_read_buffer(queue, self.read_buffer)?;
            }
            return Ok(());
        }
        let grown = (input.len() + READ_CHUNK).max(2 * self.read_buffer);
        session.grow_read_buffer(queue, grown)?;
        let mut fresh = BytesMut::with_capacity(grown);
        fresh.extend_from_slice(input);
        *input = fresh;
        self.read_buffer = input.capacity();
        session.grow_read_buffer(queue, self.read_buffer)
    }

    /// Writes the queue whole ([`flush`]), the socket's memory for it
    /// covered first; counts the bytes the socket took, and settles the
    /// session after.
    async fn write(&mut self, timer: &Timer) -> Result<(), Ended> {
        let (io, queue, session) = (&mut *self.io, &mut self.queue, &mut self.session);
        let queued = queue.remaining();
        if queued > 0 {
            let want = io.send_memory(queued);
            // Not covered: the socket holds no more than its fixed memory
            // (one record), and the write goes out in smaller pieces.
            let granted = match want {
                0 => 0,
                _ => session.cover_sending(queue, want).map_or(0, |()| want),
            };
            io.limit_send_memory(granted);
        }
        let flushed = flush(io, queue, self.connections.timeouts.send, timer).await;
        let connections = self.connections;
        connections.transport.written(queued - queue.remaining());
        flushed?;
        session.settle(queue, &connections.protocol);
        Ok(())
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
    timer: &Timer,
) -> Result<(), Ended> {
    let mut since_yield = 0;
    while queue.has_remaining() {
        let written = in_time(send_timeout, timer, io, |io, cx| poll_write(io, queue, cx)).await?;
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
    in_time(send_timeout, timer, io, |io, cx| {
        Pin::new(io).poll_flush(cx)
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
