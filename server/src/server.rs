//! The listener: accepts connections, bounds how many are served at once,
//! runs them on the chosen runtime, and shuts down gracefully.
//!
//! Two runtimes ([`Runtime`]):
//!
//! - **multi** — one work-stealing tokio runtime of N workers and one
//!   listening socket; any worker may run any connection;
//! - **per-core** — N threads, each a current-thread tokio runtime with its
//!   own listening socket bound to the same address with `SO_REUSEPORT`: the
//!   kernel spreads new connections over the sockets, and a connection lives
//!   on one thread from accept to close, with no cross-thread wake-ups.
//!
//! Both run the same accept loop ([`accept_loop`]); docs/results.md has the
//! measurements that chose the default.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

use crate::config::{Config, Runtime};
use crate::connection::{self, Ended};
use crate::shutdown::{self, Shutdown};
use crate::App;

/// A bound server, not yet accepting.
#[derive(Debug)]
pub struct Server {
    /// One listening socket per accept loop: one for `multi`, one per
    /// worker for `per-core`.
    listeners: Vec<std::net::TcpListener>,
    addr: SocketAddr,
    app: Arc<App>,
}

impl Server {
    /// Binds `config.addr` (every socket of a `per-core` server to the same
    /// port) and prepares the routes.
    pub fn bind(config: Config) -> io::Result<Server> {
        let count = match config.runtime {
            Runtime::Multi => 1,
            Runtime::PerCore => config.worker_threads(),
        };
        let first = listen(config.addr, count > 1)?;
        // Port 0 picks a port once; the other sockets join it.
        let addr = first.local_addr()?;
        let mut listeners = vec![first];
        for _ in 1..count {
            listeners.push(listen(addr, true)?);
        }
        Ok(Server {
            listeners,
            addr,
            app: Arc::new(App::new(config, addr)),
        })
    }

    /// The address it listens on (the port chosen when binding port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The shared state the routes use.
    pub fn app(&self) -> &Arc<App> {
        &self.app
    }

    /// Serves until `stop` completes, then stops accepting, lets every
    /// connection finish the responses it is writing (idle ones close at
    /// once), and returns once all are closed or the grace period is over.
    /// Blocks the calling thread; builds the runtime(s) itself.
    pub fn run(self, stop: impl Future<Output = ()>) -> io::Result<()> {
        let (trigger, shutdown) = shutdown::channel();
        let permits = Arc::new(Semaphore::new(self.app.config.max_connections));
        let workers = self.app.config.worker_threads();
        match self.app.config.runtime {
            Runtime::Multi => {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(workers)
                    .enable_all()
                    .build()?;
                let listener = self.listeners.into_iter().next().expect("one listener");
                runtime.block_on(async {
                    let accept = tokio::spawn(accept_loop(
                        TcpListener::from_std(listener)?,
                        self.app,
                        shutdown,
                        permits,
                    ));
                    stop.await;
                    trigger.trigger();
                    accept.await.map_err(io::Error::other)
                })
            }
            Runtime::PerCore => {
                let threads = self
                    .listeners
                    .into_iter()
                    .enumerate()
                    .map(|(i, listener)| {
                        let (app, shutdown, permits) =
                            (self.app.clone(), shutdown.clone(), permits.clone());
                        std::thread::Builder::new()
                            .name(format!("unflat-worker-{i}"))
                            .spawn(move || {
                                tokio::runtime::Builder::new_current_thread()
                                    .enable_all()
                                    .build()?
                                    .block_on(async {
                                        let listener = TcpListener::from_std(listener)?;
                                        accept_loop(listener, app, shutdown, permits).await;
                                        Ok::<_, io::Error>(())
                                    })
                            })
                    })
                    .collect::<io::Result<Vec<_>>>()?;
                // The calling thread only waits for the stop signal.
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?
                    .block_on(stop);
                trigger.trigger();
                for t in threads {
                    t.join()
                        .map_err(|_| io::Error::other("a worker thread panicked"))??;
                }
                Ok(())
            }
        }
    }
}

/// A non-blocking listening socket on `addr`, sharing the port with others
/// when `reuse_port`.
fn listen(addr: SocketAddr, reuse_port: bool) -> io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    #[cfg(unix)]
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    #[cfg(not(unix))]
    if reuse_port {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "--runtime per-core needs SO_REUSEPORT (Unix)",
        ));
    }
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Accepts connections on `listener` until shutdown, serving each on the
/// current runtime; then waits for them up to the grace period.
async fn accept_loop(
    listener: TcpListener,
    app: Arc<App>,
    shutdown: Shutdown,
    permits: Arc<Semaphore>,
) {
    let mut connections = JoinSet::new();
    {
        let stopped = shutdown.stopped();
        tokio::pin!(stopped);
        loop {
            // A permit first: past the limit, connections wait in the
            // kernel's accept backlog.
            let permit = tokio::select! {
                p = permits.clone().acquire_owned() => p.expect("the semaphore is never closed"),
                () = stopped.as_mut() => break,
            };
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and the like: keep serving
                        // the connections there are.
                        warn!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = stopped.as_mut() => break,
            };
            let _ = stream.set_nodelay(true);
            let (app, shutdown) = (app.clone(), shutdown.clone());
            connections.spawn(async move {
                handle(stream, peer, &app, &shutdown).await;
                drop(permit);
            });
            // Reap finished connections so the set does not grow.
            while connections.try_join_next().is_some() {}
        }
    }
    drop(listener);
    info!(
        open = connections.len(),
        "shutting down: finishing responses in progress"
    );
    let grace = app.config.grace;
    let drained = tokio::time::timeout(grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        warn!(
            left = connections.len(),
            "grace period over; closing the rest"
        );
        connections.abort_all();
    }
}

/// Serves one accepted connection. After a send timeout the connection is
/// reset rather than closed, as nginx's `reset_timedout_connection` does: the
/// kernel then discards the unsent bytes at once instead of holding them
/// for a peer that does not read.
async fn handle(mut stream: TcpStream, peer: SocketAddr, app: &App, shutdown: &Shutdown) {
    match connection::serve(&mut stream, app, shutdown).await {
        Ok(()) => {}
        Err(Ended::SendTimeout) => {
            debug!(%peer, "send timeout: resetting the connection");
            let _ = stream.set_zero_linger();
        }
        Err(e) => debug!(%peer, "connection ended: {e}"),
    }
}

/// A server running on its own thread, for tests and benchmark harnesses:
/// bound to `config.addr` (use port 0), stopped on drop.
#[derive(Debug)]
pub struct Running {
    addr: SocketAddr,
    app: Arc<App>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<io::Result<()>>>,
}

impl Running {
    /// Binds and starts a server with `config` on a new thread.
    pub fn start(config: Config) -> io::Result<Running> {
        let server = Server::bind(config)?;
        let (addr, app) = (server.local_addr(), server.app().clone());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("unflat-server".into())
            .spawn(move || {
                server.run(async {
                    let _ = rx.await;
                })
            })?;
        Ok(Running {
            addr,
            app,
            stop: Some(tx),
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The shared state the routes use.
    pub fn app(&self) -> &Arc<App> {
        &self.app
    }

    /// Shuts the server down gracefully and waits for it.
    pub fn stop(mut self) -> io::Result<()> {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> io::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        match self.thread.take() {
            Some(t) => t
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("server thread panicked"))),
            None => Ok(()),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.stop_inner();
    }
}
