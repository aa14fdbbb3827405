//! The [`Socket`] trait, and its implementation for a TCP stream (TLS's is
//! in `tls/`). Unsent bytes are limited ([`UNSENT_MOST`]) so that a socket
//! becomes writable as the peer acknowledges data: `--send-timeout` then
//! measures what the client takes. Writes use `sendmsg`, which skips the
//! file layer's work of `writev` (docs/results/history.md).

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, Interest};
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
/// `poll_write_vectored`; a TCP stream sends with `sendmsg`.
pub trait Socket: AsyncRead + AsyncWrite + Unpin {
    /// Whether [`Socket::poll_read_ready`] says when a read would find
    /// bytes, so that an idle connection may put its read buffer away (TLS,
    /// which reads into buffers of its own, keeps `false`).
    const READY_WITHOUT_BUFFER: bool = false;

    /// Waits until a read would find bytes, or the peer's close (only
    /// called when [`Socket::READY_WITHOUT_BUFFER`]).
    fn poll_read_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
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
    /// waits makes progress (`None`: unknown; the write must complete).
    fn acknowledged(&self) -> Option<u64> {
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
}

impl Socket for TcpStream {
    const READY_WITHOUT_BUFFER: bool = true;

    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        TcpStream::poll_read_ready(self, cx)
    }

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

    fn acknowledged(&self) -> Option<u64> {
        super::acked::acknowledged(self)
    }
}
