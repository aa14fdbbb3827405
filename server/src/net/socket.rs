//! The [`Socket`] trait, and its implementation for a TCP stream (TLS's is
//! in `tls/`). Unsent bytes are limited ([`UNSENT_MOST`]) so that a socket
//! becomes writable as the peer acknowledges data: `--send-timeout` then
//! measures what the client takes. Writes use `send` for one slice and
//! `sendmsg` for several: both skip the file layer's work of `writev`
//! (docs/results/history.md), and `send` the message header and iovec
//! array too (docs/results/pipelined.md).

use super::acked::Acked;
use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, Interest};
use tokio::net::TcpStream;

/// Unsent bytes the kernel keeps for a connection before a write waits
/// (`TCP_NOTSENT_LOWAT`; unacknowledged bytes come on top): enough to keep a
/// fast reader's link full on loopback.
pub const UNSENT_MOST: u32 = 512 * 1024;

/// Limits the unsent bytes of `socket`, and of every connection a listening
/// socket accepts, to [`UNSENT_MOST`] (where the system has the option).
pub fn limit_unsent(socket: &socket2::Socket) -> io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    socket.set_tcp_notsent_lowat(UNSENT_MOST)?;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = socket;
    Ok(())
}

/// What a connection reads from and writes to. A vectored write defaults to
/// `poll_write_vectored`; a TCP stream sends with `send` or `sendmsg`.
pub trait Socket: AsyncRead + AsyncWrite + Unpin {
    /// Whether the socket keeps no buffers of its own: a read that finds
    /// nothing leaves nothing behind, so an idle connection may put its read
    /// buffer away, and a write is out when it returns, so there is nothing
    /// to flush (TLS, which holds records, keeps `false`).
    const UNBUFFERED: bool = false;

    /// Reads what has arrived into the spare capacity of `buf`; how many
    /// bytes (0: the peer closed its side).
    fn poll_read_buf(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
    ) -> Poll<io::Result<usize>> {
        std::pin::pin!(self.read_buf(buf)).poll(cx)
    }

    /// Writes the slices, in order, as one call; how many bytes were taken.
    fn poll_send_vectored(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(self).poll_write_vectored(cx, bufs)
    }

    /// Bytes of output the peer has acknowledged, by which a write that
    /// waits makes progress, and its receive window (`None`: unknown; the
    /// write must complete).
    fn acknowledged(&self) -> Option<Acked> {
        None
    }

    /// Bytes the socket's own buffers may hold beyond what a write adds
    /// (TLS: records being read, one being written); in the connection's
    /// base.
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

    /// The TCP socket's descriptor, for a reset when the server's shutdown
    /// cuts the connection (`None`: no TCP socket, a session in memory).
    fn tcp_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
}

impl Socket for TcpStream {
    const UNBUFFERED: bool = true;

    fn tcp_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(std::os::fd::AsRawFd::as_raw_fd(self))
    }

    /// Tries the read first: a connection woken by its bytes reads them
    /// without asking the readiness again.
    fn poll_read_buf(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
    ) -> Poll<io::Result<usize>> {
        let room = buf.capacity() - buf.len();
        loop {
            match self.try_read_buf(buf) {
                Ok(n) => {
                    if n < room {
                        // Drained: the readiness is cleared, as tokio's own
                        // read does after a short read, so the next wait
                        // makes no `recv` that finds nothing. `try_io`
                        // clears only if no event came since the read.
                        let _ = self.try_io(Interest::READABLE, || {
                            Err::<(), _>(io::ErrorKind::WouldBlock.into())
                        });
                    }
                    return Poll::Ready(Ok(n));
                }
                // Not ready (no `recv` made) or stale: wait for the socket.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(TcpStream::poll_read_ready(self, cx))?;
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    fn poll_send_vectored(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // Sent first, the readiness asked only when it is not there: a
        // socket nearly always takes a short response at once.
        loop {
            let sent = self.try_io(Interest::WRITABLE, || {
                let socket = socket2::SockRef::from(&*self);
                match bufs {
                    // One slice (a batch of short answers): `send` hands the
                    // kernel the buffer itself, no header and iovec array to
                    // copy in and check as `sendmsg` does.
                    [one] => socket.send_with_flags(one, libc::MSG_NOSIGNAL),
                    _ => socket.send_vectored_with_flags(bufs, libc::MSG_NOSIGNAL),
                }
            });
            match sent {
                // Not writable (no call made), or the readiness was stale
                // and `try_io` cleared it: wait for the socket.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(self.poll_write_ready(cx))?;
                }
                done => return Poll::Ready(done),
            }
        }
    }

    fn acknowledged(&self) -> Option<Acked> {
        super::acked::acknowledged(self)
    }
}
