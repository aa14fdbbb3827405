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
//! The connection is generic over its IO, so tests drive it with in-memory
//! sockets that count calls.

use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::{timeout, Instant};
use unflat::queue::{WriteQueue, IOV_MAX};

use crate::session::{Session, Step, Waiting};
use crate::shutdown::Shutdown;
use crate::App;

/// Bytes the input buffer grows by when full.
const READ_CHUNK: usize = 16 * 1024;

/// iovecs tried first per `write_vectored`.
const FEW_IOVECS: usize = 64;

/// Serves one connection until the peer closes it, a response closes it, a
/// timeout expires, or the server shuts down.
pub async fn serve<S>(mut io: S, app: &App, mut shutdown: Shutdown) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut input = BytesMut::with_capacity(READ_CHUNK);
    let mut queue = WriteQueue::new();
    let mut session = Session::new();
    let mut head_started: Option<Instant> = None;
    loop {
        let step = session.process(&mut input, &mut queue, app);
        flush(&mut io, &mut queue, app.config.send_timeout()).await?;
        let waiting = match step {
            Step::Flush => continue,
            Step::Close => break,
            Step::Read(w) => w,
        };
        if shutdown.is_triggered() {
            // Every response begun is written; requests not yet complete are
            // not started.
            break;
        }
        // The head deadline runs from the first byte of a request.
        let limit = match waiting {
            Waiting::Idle => {
                head_started = None;
                app.config.idle_timeout()
            }
            Waiting::Head => {
                let started = *head_started.get_or_insert_with(Instant::now);
                app.config.head_timeout().saturating_sub(started.elapsed())
            }
            Waiting::Body => {
                head_started = None;
                app.config.body_timeout()
            }
        };
        if input.capacity() - input.len() < READ_CHUNK / 4 {
            input.reserve(READ_CHUNK);
        }
        let read = tokio::select! {
            read = timeout(limit, io.read_buf(&mut input)) => read,
            () = shutdown.triggered(), if waiting == Waiting::Idle => break,
        };
        match read {
            Ok(Ok(0)) => break, // the peer closed its side
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(e),
            Err(_elapsed) => {
                if waiting == Waiting::Head {
                    session.timed_out(&mut queue, app);
                    flush(&mut io, &mut queue, app.config.send_timeout()).await?;
                }
                break;
            }
        }
    }
    // Best effort: the peer may already be gone.
    let _ = io.shutdown().await;
    Ok(())
}

/// Writes the whole queue, one `write_vectored` per iteration, failing when a
/// call makes no progress for `send_timeout`.
pub async fn flush<S>(io: &mut S, queue: &mut WriteQueue, send_timeout: Duration) -> io::Result<()>
where
    S: AsyncWrite + Unpin,
{
    while !queue.is_empty() {
        let write = poll_fn(|cx| {
            // The iovec arrays live on the stack of this poll only, never in
            // the connection's future. Most batches need a few slices; the
            // IOV_MAX array (16 KiB to initialise) only when they need more.
            let mut few = [IoSlice::new(&[]); FEW_IOVECS];
            let n = queue.io_slices(&mut few);
            if n < FEW_IOVECS {
                return Pin::new(&mut *io).poll_write_vectored(cx, &few[..n]);
            }
            let mut many = [IoSlice::new(&[]); IOV_MAX];
            let n = queue.io_slices(&mut many);
            Pin::new(&mut *io).poll_write_vectored(cx, &many[..n])
        });
        match timeout(send_timeout, write).await {
            Ok(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(Ok(n)) => queue.advance(n),
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "send timeout: the peer stopped reading",
                ))
            }
        }
    }
    Ok(())
}
