//! A connection the server's shutdown cuts is reset, not closed: when the
//! grace period ends, or a second signal comes, its task is dropped in the
//! middle of whatever it was writing, and a plain close would end a body
//! delimited by the close with a clean FIN — a client could not tell the
//! body was cut. `SO_LINGER` 0 makes the close a reset, as every other cut
//! is.
#![allow(unsafe_code)]

use std::os::fd::RawFd;

/// Sets `SO_LINGER` 0 on a connection's socket when dropped, unless
/// disarmed: a connection whose serving was dropped before it ended is
/// reset when its socket closes.
#[derive(Debug)]
pub(crate) struct ResetIfDropped(Option<RawFd>);

impl ResetIfDropped {
    /// Armed for the TCP socket `fd` (`None`: not a TCP socket, nothing to
    /// do).
    ///
    /// The guard must not outlive the socket: it lives in the connection
    /// that `connection::serve` serves, which borrows the socket from
    /// serve's caller, so the socket — and its descriptor — outlives it.
    pub(crate) fn new(fd: Option<RawFd>) -> ResetIfDropped {
        ResetIfDropped(fd)
    }

    /// The connection ended well: its close is a plain one.
    pub(crate) fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for ResetIfDropped {
    fn drop(&mut self) {
        let Some(fd) = self.0 else {
            return;
        };
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: `fd` is open (see `new`: the socket outlives the guard),
        // and `setsockopt` reads `size_of::<linger>()` bytes of `linger`.
        // A failure leaves the close a plain one.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                std::ptr::from_ref(&linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            );
        }
    }
}
