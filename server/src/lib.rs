//! # unflat-server
//!
//! A minimal HTTP/1.1 server that shows the technique of the `unflat`
//! crate end to end: each response head is a rope encoded straight into the
//! connection's write buffer, and large bodies go to the socket as iovecs at
//! their own memory. `--strategy flatten` reproduces the old copying path so
//! that both can be measured from one binary.
//!
//! The data flow, one module each:
//! `request` (parse and check a head) → `decode` (the body's framing,
//! chunked bodies by `chunked`) → `routes` (choose the reply) → `reply`
//! (each reply writes itself) → `bodies` (the cached bodies) → `response`
//! (head rope and body into the write queue, by strategy) → [`session`] (one
//! connection's protocol state, no IO; [`budget`] bounds what all sessions
//! queue) → [`connection`] (reads, `write_vectored`, timeouts) → `server`
//! (accept loop, connection limit, graceful shutdown). [`metrics`] counts
//! what passes (`GET /metrics`).
//!
//! Public are the pieces tests, the fuzzer and the binary drive: the
//! sans-IO [`session`], the [`connection`] over any socket, the
//! [`shutdown`] signal, the [`budget`], the [`cli`], and [`Server`] /
//! [`Running`] with their [`Config`].
#![forbid(unsafe_code)]

mod access;
mod bodies;
pub mod budget;
mod chunked;
pub mod cli;
mod config;
pub mod connection;
mod decode;
pub mod metrics;
mod reply;
mod request;
mod response;
mod routes;
mod server;
pub mod session;
pub mod shutdown;
pub mod tls;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub use config::{bounds, Bounds, Config, LogLevel, Strategy};
pub use server::{Running, Server};

/// What every connection shares: the configuration, the response writer,
/// and the body caches.
#[derive(Debug)]
pub struct App {
    /// The configuration.
    pub config: Config,
    /// Writes responses, by the configured strategy.
    pub writer: response::Writer,
    /// `/end-string` bodies.
    pub end_strings: bodies::EndStrings,
    /// `/large` payloads (shared with the blocking pool that builds them).
    pub large: Arc<bodies::Large>,
    /// The `GET /` text.
    pub help: String,
    /// The field lines the routes send.
    pub fields: reply::Fields,
    /// What all connections' queues hold, against `--max-queued-total`.
    pub budget: Arc<budget::Budget>,
    /// The counters `GET /metrics` shows.
    pub metrics: metrics::Metrics,
    /// Set once shutdown has begun: `/healthz` answers 503.
    draining: AtomicBool,
}

impl App {
    /// The shared state for a server listening on `addr`, over TLS from
    /// `tls` when there is one.
    pub fn new(config: Config, addr: SocketAddr, tls: Option<&tls::Source>) -> App {
        let budget = Arc::new(budget::Budget::new(config.max_queued_total));
        App {
            writer: response::Writer::new(config.strategy, config.idle_timeout.as_secs()),
            end_strings: bodies::EndStrings::new(config.cache_bytes),
            large: Arc::new(bodies::Large::new(config.large_bytes)),
            help: reply::help_text(addr, config.strategy, tls),
            fields: reply::Fields::new(),
            metrics: metrics::Metrics::new(config.strategy, budget.clone()),
            budget,
            draining: AtomicBool::new(false),
            config,
        }
    }

    /// Marks the server as shutting down: from now on `/healthz` answers
    /// 503 while the connections drain.
    pub fn begin_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    /// True once [`App::begin_draining`] was called.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }
}
