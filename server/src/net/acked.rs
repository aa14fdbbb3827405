//! What the peer has acknowledged of a TCP connection's output
//! (`tcpi_bytes_acked`, Linux 4.1+): the send timeout measures progress by
//! it, since a slow reader acknowledges data for seconds before the socket
//! becomes writable; and its receive window, what a fast start may bank
//! (`pace.rs`). A `getsockopt` into a `tcp_info` of the size passed with it.
#![allow(unsafe_code)]

use std::os::fd::AsRawFd;

/// What the peer of a TCP connection has taken of its output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Acked {
    /// Bytes it has acknowledged.
    pub bytes: u64,
    /// The receive window it advertises now (`tcpi_snd_wnd`, Linux 6.2+;
    /// 0 where the system cannot tell): what it can hold that it has not
    /// read, about twice the steps its window reopens by.
    pub window: u64,
}

/// What the peer of `socket` has acknowledged, and its window; `None`
/// where the system cannot tell.
#[cfg(target_os = "linux")]
pub fn acknowledged(socket: &impl AsRawFd) -> Option<Acked> {
    let mut info = std::mem::MaybeUninit::<libc::tcp_info>::zeroed();
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` is valid for `len` bytes, and the kernel writes at
    // most `len` of them; zeroed first, so that fields an older kernel
    // does not fill read as 0 rather than uninitialised.
    let r = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    // SAFETY: zeroed, and partly written by the kernel: every bit pattern
    // is a valid `tcp_info` (integers only).
    let info = unsafe { info.assume_init() };
    (r == 0).then_some(Acked {
        bytes: info.tcpi_bytes_acked,
        window: u64::from(info.tcpi_snd_wnd),
    })
}

/// What the peer of `socket` has acknowledged: unknown here.
#[cfg(not(target_os = "linux"))]
pub fn acknowledged(_socket: &impl AsRawFd) -> Option<Acked> {
    None
}
