//! One connection, read to write: requests read into one [`BytesMut`],
//! handed to the [`Session`], and after each batch the [`WriteQueue`]
//! written with one `write_vectored` of all its iovecs.
//!
//! **Fair**: the session answers a [`TURN`](crate::session::TURN) at a time
//! and a write yields every `YIELD_AFTER` bytes, so no client keeps a worker.
//! **Covered**: the read buffer grows, and a TLS socket holds a write, only
//! once the budget covers it. **Cheap**: an idle connection puts its
//! buffers away (`idle.rs`), after a short hold when its client asks again
//! at once; one timer per connection, armed by a write only when the
//! socket cannot take the bytes at once. Generic over its IO,
//! so tests drive it with in-memory sockets.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tracing::debug;
use unflat::queue::WriteQueue;

use super::deadlines::{in_time, Deadlines};
use super::give_way::Registration;
use super::idle;
use super::nap;
use super::pace::Pace;
use super::reset::ResetIfDropped;
use super::shutdown::Shutdown;
use super::timers::Timer;
use super::tls::Tls;
#[cfg(feature = "tls")]
use super::tls::{self, TlsSocket};
use super::write::{flush, poll_write};
use super::{Connections, Ended, Socket, READ_CHUNK};
use crate::clock::Moment;
use crate::memory::{Full, Lease};
use crate::service::Service;
use crate::session::{Session, Step, Waiting};

/// How long an idle connection whose client asked again at once holds its
/// buffers before it puts them in the worker's pool (`idle.rs`). Each wait
/// moves the timer to its own hold's end ([`Timer::poll_moved`]), so a busy
/// connection is not woken at the end of a hold it left behind; a longer
/// hold keeps the buffers of connections that went quiet longer.
const HOLD: Duration = Duration::from_millis(20);

/// A connection's lease, its base covering what it needs before it reads
/// a byte, the socket's own `socket` bytes included.
pub fn lease<S: Service>(connections: &Connections<S>, socket: usize) -> Lease {
    let protocol = &connections.protocol;
    Lease::open(
        &protocol.memory,
        Session::base_memory(protocol, READ_CHUNK, socket),
    )
}

/// Serves one accepted connection, over TLS when there is an acceptor.
/// After a send timeout the connection is reset rather than closed (as
/// nginx's `reset_timedout_connection`): the kernel discards the unsent
/// bytes instead of holding them for a peer that does not read. So is a
/// response cut short that only the close would end.
// Not an `async fn`: its parameters would each be copied into a local of
// the future besides, in every idle connection's task.
#[allow(clippy::manual_async_fn)]
pub fn handle<'a, S: Service>(
    mut stream: TcpStream,
    peer: SocketAddr,
    tls: Option<&'a Tls>,
    connections: &'a Connections<S>,
    shutdown: &'a Shutdown,
) -> impl std::future::Future<Output = ()> + Send + 'a {
    async move {
        let _open = connections.transport.open();
        let lease = lease(connections, tls.map_or(0, fixed_memory));
        match tls {
            None => {
                let ended = serve(&mut stream, Some(peer), connections, shutdown, lease).await;
                ended_with(ended, &stream, peer, connections);
            }
            // Boxed, or every cleartext connection's task would be as large
            // as a TLS one's.
            #[cfg(feature = "tls")]
            Some(tls) => {
                let served = Box::pin(serve_tls(stream, peer, tls, connections, shutdown, lease));
                if let Some((ended, tcp)) = served.await {
                    ended_with(ended, &tcp, peer, connections);
                }
            }
            #[cfg(not(feature = "tls"))]
            Some(tls) => match *tls {},
        }
    }
}

/// Resets the connection on `tcp` when how it `ended` asks for it, and
/// counts why.
fn ended_with<S: Service>(
    ended: Result<(), Ended>,
    tcp: &TcpStream,
    peer: SocketAddr,
    connections: &Connections<S>,
) {
    match (ended, tcp) {
        (Ok(()), _) => {}
        (Err(Ended::SendTimeout), tcp) => {
            debug!(%peer, "send timeout: resetting the connection");
            connections.transport.send_timed_out();
            let _ = tcp.set_zero_linger();
        }
        (Err(Ended::TooSlow), tcp) => {
            debug!(%peer, "below --min-send-rate: resetting the connection");
            connections.transport.read_too_slowly();
            let _ = tcp.set_zero_linger();
        }
        (Err(Ended::CutShort), tcp) => {
            debug!(%peer, "a response cut short: resetting the connection");
            let _ = tcp.set_zero_linger();
        }
        (Err(e), _) => debug!(%peer, "connection ended: {e}"),
    }
}

/// What rustls holds of a connection over `tls` whatever it does.
fn fixed_memory(tls: &Tls) -> usize {
    #[cfg(feature = "tls")]
    return tls.fixed_memory;
    #[cfg(not(feature = "tls"))]
    match *tls {}
}

/// Serves one TLS connection: the handshake within `--handshake-timeout`,
/// then [`serve`]; what it ended with and its TCP stream, or `None` when
/// the handshake did not complete.
#[cfg(feature = "tls")]
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

/// Serves one connection on `lease` ([`lease`]) until the peer or a
/// response closes it, a timeout expires, or the server shuts down. Dropped
/// before it ends — the shutdown's grace over, or a second signal — or
/// ended by an error, the connection is reset when its socket closes, so
/// that no body it was sending looks whole.
pub async fn serve<S: Service, IO: Socket>(
    io: &mut IO,
    peer: Option<SocketAddr>,
    connections: &Connections<S>,
    shutdown: &Shutdown,
    lease: Lease,
) -> Result<(), Ended> {
    let mut c = Connection::open(io, peer, connections, lease);
    // It is told the server stops through its slot, as it is asked to give
    // way: no future of the shutdown's own in every connection's task.
    let registration = connections.idle.register();
    let timer = Timer::new();
    let mut deadlines = Deadlines::default();
    loop {
        let before = c.session.served();
        let step = c
            .session
            .process(&mut c.input, &mut c.queue, &connections.protocol);
        nap::turn(c.session.served() - before);
        if let Step::Reset = step {
            return Err(Ended::CutShort);
        }
        c.write(&timer).await?;
        let waiting = match step {
            Step::Flush => {
                // The worker's other connections go first.
                tokio::task::yield_now().await;
                continue;
            }
            Step::Close => break,
            Step::Reset => unreachable!("returned above"),
            Step::Defer(job) => {
                c.session.resume(job.run().await);
                continue;
            }
            Step::Wait if c.session.waits_for_room() => {
                // A handler that has not taken what it was given of its
                // body: the application's time, as a job's — no deadline of
                // the core's, and no giving way at the connection limit (an
                // upload under way is not idle).
                std::future::poll_fn(|cx| c.session.poll_wait(cx)).await;
                continue;
            }
            Step::Wait => {
                // A stream waiting for its next chunk holds its connection
                // and does no work: at the connection limit it gives way
                // as an idle one does, cut as every stream is (a reset, no
                // last chunk), so that a new client is not left waiting
                // for the streams to end.
                let until = Moment::now().after(connections.timeouts.idle);
                registration.idle(until);
                let asked = std::future::poll_fn(|cx| {
                    if c.session.poll_wait(cx).is_ready() {
                        return Poll::Ready(false);
                    }
                    registration.poll_asked(cx).map(|()| true)
                })
                .await;
                registration.busy();
                if asked {
                    return Err(Ended::CutShort);
                }
                continue;
            }
            Step::Read(w) => w,
        };
        // A request is read next: the send period, if any, is over.
        c.pace.reset();
        // A connection that has served a request closes when the server
        // stops: every response begun is written. One accepted but not yet
        // asked anything waits for its first request (within its
        // deadline, and the grace) and answers it with `Connection:
        // close`: its client's connect succeeded, and a close without an
        // answer would leave it none.
        let fresh = c.session.served() == 0;
        if shutdown.is_triggered() && !fresh {
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
        let read = c.read(waiting, deadline, &timer, &registration, fresh);
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
    // Best effort, within the send timeout: a TLS close_notify waits for a
    // socket that a peer that stopped reading never makes writable.
    let rules = &connections.timeouts.pace;
    let closed = in_time(&mut c.pace, rules, &timer, &mut *c.io, |io, cx| {
        Pin::new(io).poll_shutdown(cx)
    });
    match closed.await {
        Err(e @ (Ended::SendTimeout | Ended::TooSlow)) => Err(e),
        _ => {
            c.reset.disarm();
            Ok(())
        }
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

/// How an idle wait ended.
enum Idle {
    /// The read it made.
    Read(Result<Got, Ended>),
    /// Idle past its deadline, the server stopping, or asked to give way.
    End,
    /// Readable, the read buffer short of room.
    Short,
}

/// A connection being served: its socket, its buffers, its session.
struct Connection<'a, S: Service, IO> {
    io: &'a mut IO,
    connections: &'a Connections<S>,
    input: BytesMut,
    /// The read buffer's whole allocation: `input.capacity()` shrinks as
    /// requests are consumed from its front.
    read_buffer: usize,
    queue: WriteQueue,
    session: Session<S>,
    /// Whether the queue had a frame buffer when it was put away.
    had_frame: bool,
    /// Whether an idle wait keeps the buffers for [`HOLD`] first.
    keeps: bool,
    /// How the client's pace is judged while a write waits.
    pace: Pace,
    /// Resets the connection unless it ends well: see [`serve`].
    reset: ResetIfDropped,
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
        let reset = ResetIfDropped::new(io.tcp_fd());
        let session = Session::open(&connections.protocol, lease, read_buffer, socket, peer);
        Connection {
            io,
            connections,
            read_buffer: input.capacity(),
            input,
            queue: WriteQueue::with_policy(connections.policy),
            session,
            had_frame: false,
            keeps: false,
            pace: Pace::default(),
            reset,
        }
    }

    /// Reads more of what the session is `waiting` for, by `deadline`; or
    /// says how the connection ends ([`Got`]).
    async fn read(
        &mut self,
        waiting: Waiting,
        deadline: Moment,
        timer: &Timer,
        registration: &Registration<'_>,
        fresh: bool,
    ) -> Result<Got, Ended> {
        let service = &self.connections.protocol;
        // Only a connection that has served a request ends its wait when
        // the server stops.
        let stops = waiting == Waiting::Idle && !fresh;
        if IO::UNBUFFERED
            && waiting == Waiting::Idle
            && self.input.is_empty()
            && !self.queue.has_remaining()
        {
            match self.wait_idle(deadline, timer, registration, stops).await {
                Idle::Read(read) => return read,
                Idle::End => return Ok(Got::End),
                Idle::Short => {}
            }
        }
        if self.short_of_room() {
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
            () = registration.stopped(), if stops => return Ok(Got::End),
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

    /// Waits for the next request, and reads it in the poll that finds it
    /// ready (no `select!`, no second readiness check). The buffers go to
    /// the pool at once, or, for a client whose last request came within
    /// [`HOLD`] (a keep-alive loop), once the wait outlasts it: such a
    /// client costs no visit to the pool. A connection served once and
    /// left open holds no buffers, however many open at once.
    async fn wait_idle(
        &mut self,
        deadline: Moment,
        timer: &Timer,
        registration: &Registration<'_>,
        stops: bool,
    ) -> Idle {
        // The idle deadline is its wait's start plus `--idle-timeout`: the
        // hold's end from the same start, without reading the clock again.
        let idle = self.connections.timeouts.idle;
        let held = deadline.before(idle.saturating_sub(HOLD));
        let mut away = false;
        poll_fn(|cx| {
            if away {
                self.take_buffers_out();
                away = false;
                // Asked again within the hold after a response: the next
                // wait keeps them. (A first request proves no loop.)
                self.keeps = self.session.served() > 0 && Moment::now() < held;
            }
            if self.short_of_room() {
                // A pooled buffer's consumed front: `room_to_read` first.
                return Poll::Ready(Idle::Short);
            }
            if let Poll::Ready(read) = self.io.poll_read_buf(cx, &mut self.input) {
                return Poll::Ready(Idle::Read(match read {
                    Ok(0) => Ok(Got::End), // the peer closed its side
                    Ok(_) => Ok(Got::More),
                    Err(e) => Err(e.into()),
                }));
            }
            // The timer is armed for the hold's end first: the deadline is
            // polled once the buffers are away.
            if !away && (!self.keeps || timer.poll_moved(held, cx).is_ready()) {
                self.put_buffers_away();
                (away, self.keeps) = (true, false);
            }
            if (away && timer.poll_passed(deadline, cx).is_ready())
                || (stops && registration.poll_stopped(cx).is_ready())
                || registration.poll_asked(cx).is_ready()
            {
                return Poll::Ready(Idle::End);
            }
            Poll::Pending
        })
        .await
    }

    /// Puts the empty buffers away (`idle.rs`); a read buffer that had grown
    /// is freed instead.
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

    /// Takes buffers out of the pool for the request that is arriving; a
    /// frame buffer only for a connection that had one.
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

    /// Whether the read buffer has too little room left for the next read
    /// ([`Connection::room_to_read`] makes it).
    fn short_of_room(&self) -> bool {
        self.input.capacity() - self.input.len() < READ_CHUNK / 4
    }

    /// Makes room for the next read, the budget covering any growth first.
    /// `reserve` moves the unread bytes to the front without allocating when
    /// they fit what was consumed; otherwise they are copied into a buffer
    /// sized here, so that the allocation is known exactly (`BytesMut`'s
    /// own growth would keep the consumed front).
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
    /// covered first, and settles the session after.
    async fn write(&mut self, timer: &Timer) -> Result<(), Ended> {
        let (io, queue, session, pace) = (
            &mut *self.io,
            &mut self.queue,
            &mut self.session,
            &mut self.pace,
        );
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
        if IO::UNBUFFERED && queued > 0 {
            // One call nearly always takes a short batch whole: made here,
            // before `flush`'s futures are built.
            match poll_fn(|cx| Poll::Ready(poll_write(io, queue, cx))).await {
                Poll::Ready(Ok(n)) if n > 0 => queue.advance(n),
                _ => {} // `flush` calls again, and fails or waits
            }
        }
        let flushed = match queue.has_remaining() || !IO::UNBUFFERED {
            true => flush(io, queue, pace, &self.connections.timeouts.pace, timer).await,
            false => Ok(()),
        };
        let connections = self.connections;
        connections.transport.written(queued - queue.remaining());
        flushed?;
        session.settle(queue, &connections.protocol);
        Ok(())
    }
}
