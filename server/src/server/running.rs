//! A server on a thread of its own, for tests and benchmark harnesses.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use super::{Making, Server, Stack};
use crate::config::Config;
use crate::service::Service;

/// A server running on its own thread, for tests and benchmark harnesses:
/// bound to `config.addr` (use port 0), stopped on drop.
#[derive(Debug)]
pub struct Running<S: Service> {
    addr: SocketAddr,
    stack: Arc<Stack<S>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<io::Result<()>>>,
}

impl<S: Service> Running<S> {
    /// Binds and starts a server of what `make` makes, with `config`, on a
    /// new thread.
    pub fn start_with(
        config: Config,
        make: impl FnOnce(Making<'_>) -> S,
    ) -> io::Result<Running<S>> {
        let server = Server::bind_with(config, make)?;
        let (addr, stack) = (server.local_addr(), server.stack().clone());
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
            stack,
            stop: Some(tx),
            thread: Some(thread),
        })
    }
}

impl<S: Service> Running<S> {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its layers.
    pub fn stack(&self) -> &Arc<Stack<S>> {
        &self.stack
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

impl<S: Service> Drop for Running<S> {
    fn drop(&mut self) {
        let _ = self.stop_inner();
    }
}
