//! What the peer has acknowledged of a TCP connection's output
//! (`tcpi_bytes_acked`, Linux 4.1+): the send timeout measures progress by
//! it, since a slow reader acknowledges data for seconds before the socket
//! becomes writable. The server's one `unsafe`: a `getsockopt` into a
//! `tcp_info` of the size passed with it.
#![allow(unsafe_code)]

use std::os::fd::AsRawFd;

/// Bytes of output the peer of `socket` has acknowledged; `None` where the
/// system cannot tell.
#[cfg(target_os = "linux")]
pub fn acknowledged(socket: &impl AsRawFd) -> Option<u64> {
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
    (r == 0).then_some(info.tcpi_bytes_acked)
}

/// Bytes of output the peer of `socket` has acknowledged: unknown here.
#[cfg(not(target_os = "linux"))]
pub fn acknowledged(_socket: &impl AsRawFd) -> Option<u64> {
    None
}
