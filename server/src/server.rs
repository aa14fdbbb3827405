//! The listener: accepts connections, bounds how many are served at once,
//! and shuts down gracefully.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

use crate::config::Config;
use crate::connection;
use crate::shutdown;
use crate::App;

/// A bound server, not yet accepting.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    app: Arc<App>,
}

impl Server {
    /// Binds `config.addr` and prepares the routes.
    pub async fn bind(config: Config) -> io::Result<Server> {
        let listener = TcpListener::bind(config.addr).await?;
        let addr = listener.local_addr()?;
        Ok(Server {
            listener,
            app: Arc::new(App::new(config, addr)),
        })
    }

    /// The address it listens on (the port chosen when binding port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The shared state the routes use.
    pub fn app(&self) -> &Arc<App> {
        &self.app
    }

    /// Accepts connections until `stop` completes, then stops accepting,
    /// lets every connection finish the responses it is writing (idle ones
    /// close at once), and returns once all are closed or the grace period
    /// is over.
    pub async fn run(self, stop: impl Future<Output = ()>) -> io::Result<()> {
        let (trigger, shutdown) = shutdown::channel();
        let permits = Arc::new(Semaphore::new(self.app.config.max_connections));
        let mut connections = JoinSet::new();
        tokio::pin!(stop);
        loop {
            // A permit first: past the limit, connections wait in the
            // kernel's accept backlog.
            let permit = tokio::select! {
                p = permits.clone().acquire_owned() => p.expect("the semaphore is never closed"),
                () = &mut stop => break,
            };
            let (stream, peer) = tokio::select! {
                accepted = self.listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and the like: keep serving
                        // the connections there are.
                        warn!("accept failed: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = &mut stop => break,
            };
            let _ = stream.set_nodelay(true);
            let app = self.app.clone();
            let shutdown = shutdown.clone();
            connections.spawn(async move {
                if let Err(e) = connection::serve(stream, &app, shutdown).await {
                    debug!(%peer, "connection ended: {e}");
                }
                drop(permit);
            });
            // Reap finished connections so the set does not grow.
            while connections.try_join_next().is_some() {}
        }
        drop(self.listener);
        info!(
            open = connections.len(),
            "shutting down: finishing responses in progress"
        );
        trigger.trigger();
        let grace = self.app.config.grace();
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
        Ok(())
    }
}

/// A server running on its own runtime thread, for tests and benchmark
/// harnesses: bound to `config.addr` (use port 0), stopped on drop.
#[derive(Debug)]
pub struct Running {
    addr: SocketAddr,
    app: Arc<App>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<io::Result<()>>>,
}

impl Running {
    /// Starts a server with `config` on a new multi-threaded runtime of
    /// `config.worker_threads()` workers.
    pub fn start(config: Config) -> io::Result<Running> {
        // Everything tokio happens on the server's own thread, so that this
        // works from inside another runtime too (async tests).
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("unflat-server".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(config.worker_threads())
                    .enable_all()
                    .build()?;
                runtime.block_on(async {
                    let server = match Server::bind(config).await {
                        Ok(s) => s,
                        Err(e) => {
                            let _ = ready_tx.send(Err(io::Error::new(e.kind(), e.to_string())));
                            return Err(e);
                        }
                    };
                    let _ = ready_tx.send(server.local_addr().map(|a| (a, server.app().clone())));
                    server
                        .run(async {
                            let _ = rx.await;
                        })
                        .await
                })
            })?;
        let (addr, app) = ready_rx
            .recv()
            .map_err(|_| io::Error::other("the server thread ended before binding"))??;
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
