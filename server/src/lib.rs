//! # unflat-server
//!
//! A minimal HTTP/1.1 server that shows the technique of the `unflat`
//! crate end to end: each response head is a rope encoded straight into the
//! connection's write buffer, and large bodies go to the socket as iovecs at
//! their own memory. `--strategy flatten` reproduces the old copying path so
//! that both can be measured from one binary.
//!
//! The data flow, one module each:
//! [`request`] (parse and check a head, decode a body) →
//! [`routes`] (choose the reply) → [`bodies`] (the cached bodies) →
//! [`response`] (head rope and body into the write queue, by strategy) →
//! [`session`] (one connection's protocol state, no IO) →
//! [`connection`] (reads, `write_vectored`, timeouts) →
//! [`server`] (accept loop, connection limit, graceful shutdown).

pub mod bodies;
pub mod cli;
pub mod config;
pub mod connection;
pub mod request;
pub mod response;
pub mod routes;
pub mod server;
pub mod session;
pub mod shutdown;

use std::net::SocketAddr;

pub use config::{Config, Strategy};
pub use server::{Running, Server};

/// What every connection shares: the configuration, the header lines
/// rendered at start-up, and the body caches.
#[derive(Debug)]
pub struct App {
    /// The configuration.
    pub config: Config,
    /// Header lines every response may carry.
    pub lines: response::Lines,
    /// `/end-string` bodies.
    pub end_strings: bodies::EndStrings,
    /// The `/large` payload.
    pub large: bodies::Large,
    /// The `GET /` text.
    pub help: String,
}

impl App {
    /// The shared state for a server listening on `addr`.
    pub fn new(config: Config, addr: SocketAddr) -> App {
        App {
            lines: response::Lines::new(config.idle_timeout),
            end_strings: bodies::EndStrings::new(config.cache_bytes),
            large: bodies::Large::default(),
            help: cli::help_text(addr, config.strategy),
            config,
        }
    }
}
