//! Accepting: the listening socket (its backlog, SO_REUSEPORT), and the
//! loop that accepts within `--max-connections`, asking idle connections
//! to give way, until shutdown — then the drain.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tracing::{info, warn};

use super::Stack;
use crate::net::shutdown::Shutdown;
use crate::net::tls::Tls;
use crate::service::Service;
use crate::{log, net};

/// How often the listener, at `--max-connections`, asks again for an idle
/// connection to give way.
const ASK_AGAIN: Duration = Duration::from_millis(100);

/// Connections the kernel queues for `accept` (tokio's default): a burst of
/// new connections past std's 128 is not refused.
const BACKLOG: i32 = 1024;

/// How long the drain waits, once no new handshake can begin, for those
/// under way to complete: a client whose `connect` succeeded has its ACK
/// at most a round trip away, and the connection it makes is taken too.
const HANDSHAKES_UNDER_WAY: Duration = Duration::from_millis(100);

/// A listening socket on `addr` with a [`BACKLOG`] of its own, and
/// SO_REUSEPORT with `reuse_port`.
pub(super) fn listen(addr: SocketAddr, reuse_port: bool) -> io::Result<std::net::TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        None,
    )?;
    #[cfg(unix)]
    socket.set_reuse_address(true)?;
    if reuse_port {
        set_reuse_port(&socket)?;
    }
    // Inherited by every accepted connection.
    net::limit_unsent(&socket)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    Ok(socket.into())
}

#[cfg(all(
    unix,
    not(any(target_os = "solaris", target_os = "illumos", target_os = "cygwin"))
))]
fn set_reuse_port(socket: &socket2::Socket) -> io::Result<()> {
    socket.set_reuse_port(true)
}

#[cfg(not(all(
    unix,
    not(any(target_os = "solaris", target_os = "illumos", target_os = "cygwin"))
)))]
fn set_reuse_port(_: &socket2::Socket) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "SO_REUSEPORT (--reuse-port) is not available on this system",
    ))
}

/// From now on the kernel drops every segment that would begin a
/// connection to `listener` (SYN without ACK), so that none completes
/// after the drain's last `accept` and is reset when the listener closes;
/// handshakes under way still complete. A client dropped so tries again a
/// second later and finds the port closed, refused as after the close.
/// Linux: a classic BPF socket filter, which sees each segment from its
/// TCP header (the flags are its byte 13).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn refuse_new_handshakes(listener: &std::net::TcpListener) -> io::Result<()> {
    use libc::{BPF_ABS, BPF_ALU, BPF_AND, BPF_B, BPF_JEQ, BPF_JMP, BPF_K, BPF_LD, BPF_RET};
    use socket2::SockFilter;
    const SYN: u32 = 0x02;
    const ACK: u32 = 0x10;
    let op = |code: u32| code as u16;
    let program = [
        SockFilter::new(op(BPF_LD | BPF_B | BPF_ABS), 0, 0, 13),
        SockFilter::new(op(BPF_ALU | BPF_AND | BPF_K), 0, 0, SYN | ACK),
        // SYN alone: a new connection, dropped (kept length 0); anything
        // else kept whole.
        SockFilter::new(op(BPF_JMP | BPF_JEQ | BPF_K), 0, 1, SYN),
        SockFilter::new(op(BPF_RET | BPF_K), 0, 0, 0),
        SockFilter::new(op(BPF_RET | BPF_K), 0, 0, u32::MAX),
    ];
    socket2::SockRef::from(listener).attach_filter(&program)
}

/// Elsewhere nothing stops a handshake: the drain takes what is queued.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn refuse_new_handshakes(_: &std::net::TcpListener) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}

/// Serves an accepted connection on a task of `connections`, over the TLS
/// current now, holding `permit` (none: one taken past the limit, at
/// shutdown) until it ends.
fn spawn<S: Service>(
    connections: &mut JoinSet<()>,
    (stream, peer): (TcpStream, SocketAddr),
    stack: &Arc<Stack<S>>,
    tls: &RwLock<Option<Arc<Tls>>>,
    shutdown: &Shutdown,
    permit: Option<OwnedSemaphorePermit>,
) {
    let _ = stream.set_nodelay(true);
    // An `Arc`: the task holds it while the connection lives, and every
    // byte of an idle connection's task counts (net/idle.rs).
    let tls = tls.read().unwrap_or_else(|e| e.into_inner()).clone();
    let (stack, shutdown) = (stack.clone(), shutdown.clone());
    connections.spawn(async move {
        net::handle(stream, peer, tls.as_deref(), stack.connections(), &shutdown).await;
        drop(permit);
    });
}

/// Accepts connections until shutdown, each over the TLS current when it
/// is accepted; then waits for them up to the grace period, or until `cut`.
pub(super) async fn accept_loop<S: Service>(
    listener: TcpListener,
    stack: Arc<Stack<S>>,
    tls: Arc<RwLock<Option<Arc<Tls>>>>,
    shutdown: Shutdown,
    permits: Arc<Semaphore>,
    cut: Arc<Notify>,
) {
    let mut connections = JoinSet::new();
    // Named in the drain's lines: the admin address drains too.
    let at = listener.local_addr().map(tracing::field::display).ok();
    // Out of file descriptors, accept fails every 50 ms: logged once a
    // second, with a count.
    let mut failing = log::Repeated::default();
    {
        let stopped = shutdown.stopped();
        tokio::pin!(stopped);
        loop {
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(a) => {
                        if let Some(more) = failing.passed() {
                            warn!("accept failed{more}; accepting again");
                        }
                        a
                    }
                    Err(e) => {
                        if let Some(more) = failing.occurred() {
                            warn!("accept failed: {e}{more}");
                        }
                        net::timers::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = stopped.as_mut() => break,
            };
            // At the limit, the connection idle longest gives way; with none
            // idle, this one waits and the ask is repeated.
            let permit = loop {
                if let Ok(p) = permits.clone().try_acquire_owned() {
                    break Some(p);
                }
                stack.connections().idle.ask_longest_idle();
                tokio::select! {
                    p = permits.clone().acquire_owned() => break p.ok(),
                    () = net::timers::sleep(ASK_AGAIN) => {}
                    // Accepted already: answered in the drain, past the
                    // limit, rather than closed without a word.
                    () = stopped.as_mut() => break None,
                }
            };
            let stopping = permit.is_none();
            spawn(
                &mut connections,
                (stream, peer),
                &stack,
                &tls,
                &shutdown,
                permit,
            );
            // Reap finished connections so the set does not grow.
            while connections.try_join_next().is_some() {}
            if stopping {
                break;
            }
        }
        // Those idle between requests close now; the others once their
        // responses are written.
        stack.connections().idle.stop_all();
        // The connections the kernel completed before the listener closes
        // are taken and answered (with `Connection: close`), not reset
        // with it: their clients' connect succeeded. At most the backlog,
        // past --max-connections for the drain.
        // Asked of the socket itself: tokio's accept knows only the
        // readiness it was told of.
        let listener = listener.into_std();
        let next = |l: &std::net::TcpListener| loop {
            match l.accept() {
                Ok(accepted) => return Some(accepted),
                // One that its client gave up on; the rest are still there.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionAborted => {}
                Err(_) => return None,
            }
        };
        let take_queued = |connections: &mut JoinSet<()>| {
            while let Some((stream, peer)) = listener.as_ref().ok().and_then(next) {
                let Ok(stream) = stream
                    .set_nonblocking(true)
                    .and_then(|()| TcpStream::from_std(stream))
                else {
                    continue;
                };
                spawn(connections, (stream, peer), &stack, &tls, &shutdown, None);
            }
        };
        // No handshake begins from here on; those under way end in the
        // queue and are taken after them.
        let refusing = listener
            .as_ref()
            .is_ok_and(|l| refuse_new_handshakes(l).is_ok());
        take_queued(&mut connections);
        if refusing {
            net::timers::sleep(HANDSHAKES_UNDER_WAY).await;
            take_queued(&mut connections);
        }
        // Closed now: a connect from here on is refused.
        drop(listener);
    }
    // Reaped, the set holds the open connections.
    while connections.try_join_next().is_some() {}
    info!(
        addr = at,
        open = connections.len(),
        "shutting down: finishing responses in progress (a second Ctrl-C or SIGTERM closes them now)"
    );
    let grace = stack.config().grace;
    let drained = tokio::select! {
        drained = net::timers::timeout(grace, async {
            while connections.join_next().await.is_some() {}
        }) => drained.is_ok(),
        () = cut.notified() => {
            while connections.try_join_next().is_some() {}
            warn!(cut = connections.len(), "second signal: closing the connections left now, their responses unfinished");
            connections.abort_all();
            return;
        }
    };
    if !drained {
        warn!(
            left = connections.len(),
            "grace period over; closing the rest"
        );
        connections.abort_all();
    }
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use super::*;
    use std::net::TcpStream;

    /// Once new handshakes are refused, a connect gets no answer, while a
    /// connection the kernel completed before is still there to accept and
    /// carries its data.
    #[test]
    fn refused_handshakes_leave_the_queued_connection() {
        let listener = listen("127.0.0.1:0".parse().unwrap(), false).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut queued = TcpStream::connect(addr).unwrap();
        refuse_new_handshakes(&listener).unwrap();
        let late = TcpStream::connect_timeout(&addr, Duration::from_millis(300));
        assert_eq!(
            late.map(|_| ()).map_err(|e| e.kind()),
            Err(io::ErrorKind::TimedOut),
            "a SYN after the filter was answered"
        );
        let (mut taken, _) = listener.accept().unwrap();
        std::io::Write::write_all(&mut queued, b"x").unwrap();
        let mut got = [0u8; 1];
        std::io::Read::read_exact(&mut taken, &mut got).unwrap();
        assert_eq!(&got, b"x");
    }
}
