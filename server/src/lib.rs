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
//! (each reply writes itself) → `bodies` (built off the async workers,
//! cached, shared) → `response` (head rope and body into the write queue,
//! by strategy) → [`session`] (one connection's protocol state, no IO) →
//! [`connection`] (reads, `write_vectored`, timeouts) → `server` (accept
//! loop, connection limit, graceful shutdown). [`memory`] counts everything
//! a client can make the server hold against one limit; [`metrics`] counts
//! what passes (`GET /metrics`); [`tls`] loads the certificate and runs
//! handshakes.
//!
//! Public are the pieces tests, the fuzzer and the binary drive: the
//! sans-IO [`session`], the [`connection`] over any socket, the
//! [`shutdown`] signal, the [`memory`] account, the [`cli`], [`tls`], and
//! [`Server`] / [`Running`] with their [`Config`].
#![forbid(unsafe_code)]

mod access;
mod bodies;
mod chunked;
pub mod cli;
mod config;
pub mod connection;
mod decode;
pub mod memory;
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
/// the memory account and the bodies.
#[derive(Debug)]
pub struct App {
    /// The configuration.
    pub config: Config,
    /// Writes responses, by the configured strategy.
    pub writer: response::Writer,
    /// Everything clients make the server hold, against `--memory-limit`.
    pub memory: Arc<memory::Memory>,
    /// `/end-string` and `/large` bodies: cached, and built once.
    pub bodies: Arc<bodies::Bodies>,
    /// The `GET /` text.
    pub help: String,
    /// The field lines the routes send.
    pub fields: reply::Fields,
    /// The counters `GET /metrics` shows.
    pub metrics: metrics::Metrics,
    /// Set once shutdown has begun: `/healthz` answers 503.
    draining: AtomicBool,
}

impl App {
    /// The shared state for a server listening on `addr`, over `tls` when
    /// there is one.
    pub fn new(config: Config, addr: SocketAddr, tls: Option<&tls::Tls>) -> App {
        let memory = Arc::new(memory::Memory::new(
            config.memory_limit,
            config.connection_memory(),
        ));
        let bodies = Arc::new(bodies::Bodies::new(
            memory.clone(),
            config.cache_bytes(),
            config.build_threads(),
        ));
        let trust = tls.and_then(tls::Tls::self_signed_pem);
        App {
            writer: response::Writer::new(
                config.strategy,
                config.idle_timeout.as_secs(),
                memory.clone(),
            ),
            help: reply::help_text(addr, config.strategy, tls.is_some(), trust),
            fields: reply::Fields::new(),
            metrics: metrics::Metrics::new(config.strategy, memory.clone(), bodies.clone()),
            memory,
            bodies,
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
