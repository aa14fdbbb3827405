//! The queue to the socket: one vectored write of its iovecs at a time
//! (a few on the stack, [`IOV_MAX`] only when they do not hold the batch),
//! the worker given up every [`YIELD_AFTER`] bytes, and the client's pace
//! judged while a write waits.

use bytes::Buf;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use unflat::queue::WriteQueue;

use super::deadlines::in_time;
use super::pace::{Pace, PaceRules};
use super::timers::Timer;
use super::{Ended, Socket};

/// Bytes a connection writes in one go before it lets the other tasks of
/// its worker run: a peer that reads a long body as fast as it comes would
/// otherwise keep the worker for the whole body.
const YIELD_AFTER: usize = 256 << 10;

/// iovecs tried first per `write_vectored`.
const FEW_IOVECS: usize = 8;

/// Linux's `UIO_MAXIOV` (and macOS's `IOV_MAX`): the most slices one
/// `writev` takes; a longer array would be filled for nothing.
const IOV_MAX: usize = 1024;

/// Writes the whole queue, then flushes a socket that buffers (TLS holds
/// records), failing when `pace` judges the client stopped or too slow.
pub(super) async fn flush<S: Socket>(
    io: &mut S,
    queue: &mut WriteQueue,
    pace: &mut Pace,
    rules: &PaceRules,
    timer: &Timer,
) -> Result<(), Ended> {
    let mut since_yield = 0;
    while queue.has_remaining() {
        let written = in_time(pace, rules, timer, io, |io, cx| poll_write(io, queue, cx)).await?;
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
    if S::UNBUFFERED {
        return Ok(());
    }
    in_time(pace, rules, timer, io, |io, cx| Pin::new(io).poll_flush(cx)).await
}

/// One vectored write of the queue's pending bytes. The iovec arrays live
/// on this poll's stack, never in the connection's future; the IOV_MAX one
/// (16 KiB to initialise) only when a few slices do not hold the batch.
pub(super) fn poll_write<S: Socket>(
    io: &mut S,
    queue: &WriteQueue,
    cx: &mut Context<'_>,
) -> Poll<io::Result<usize>> {
    let mut few = [IoSlice::new(&[]); FEW_IOVECS];
    let n = queue.chunks_vectored(&mut few);
    if n < FEW_IOVECS {
        return io.poll_send_vectored(cx, &few[..n]);
    }
    poll_write_many(io, queue, cx)
}

/// [`poll_write`] of a queue with many slices. Apart, so that the common
/// write's frame is small: a 16 KiB frame is probed page by page on every
/// call.
#[cold]
#[inline(never)]
fn poll_write_many<S: Socket>(
    io: &mut S,
    queue: &WriteQueue,
    cx: &mut Context<'_>,
) -> Poll<io::Result<usize>> {
    let mut many = [IoSlice::new(&[]); IOV_MAX];
    let n = queue.chunks_vectored(&mut many);
    io.poll_send_vectored(cx, &many[..n])
}
