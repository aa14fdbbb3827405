//! A server's layers, made once from its [`Config`]: the memory account,
//! the transport's counters, the service and its observer, the writer —
//! and what a service is made with ([`Making`]).

use std::net::SocketAddr;
use std::sync::Arc;

use crate::config::Config;
use crate::memory::Memory;
use crate::net::tls::Tls;
use crate::net::{Connections, IdleConnections, Transport};
use crate::observe::{Label, Metrics, Report, Standard};
use crate::response::Writer;
use crate::service::Service;
use crate::session::{Draining, Protocol};

/// A server's layers, made from its [`Config`]: the connections' shared
/// part, which holds the protocol, which holds the service. Each layer
/// sees only its own part.
#[derive(Debug)]
pub struct Stack<S: Service> {
    config: Config,
    connections: Connections<S>,
}

/// What a service is made with ([`Server::bind_with`](super::Server::bind_with)).
#[derive(Debug)]
pub struct Making<'a> {
    /// The configuration.
    pub config: &'a Config,
    /// The address it listens on.
    pub address: SocketAddr,
    /// Its certificate, over HTTPS.
    pub tls: Option<&'a Tls>,
    /// The memory account.
    pub memory: &'a Arc<Memory>,
    /// Set once shutdown has begun.
    pub draining: &'a Draining,
    /// Connections open, bytes written, send timeouts.
    pub transport: &'a Arc<Transport>,
}

impl Making<'_> {
    /// The core's observer of this server's responses, counted under the
    /// labels `L` (`()`: all under one): the counters a service renders at
    /// its `/metrics` ([`Standard::metrics`]) and the access log as
    /// `--access-log` and `--access-log-format` ask. Each call makes
    /// counters of its own: the service keeps the one it names as its
    /// observer (a clone of it renders the same counts).
    pub fn standard<L: Label>(&self) -> Standard<L> {
        self.standard_reporting(None)
    }

    /// [`Making::standard`], with what the service reports of its own on
    /// `/metrics` beside the core's counters (a cache, its builds).
    pub fn standard_reporting<L: Label>(&self, report: Option<Arc<dyn Report>>) -> Standard<L> {
        let metrics = Metrics::new(
            self.config.strategy,
            self.memory.clone(),
            self.transport.clone(),
            report,
        );
        Standard::new(
            metrics,
            self.config.access_log(),
            self.config.max_request_line,
        )
    }
}

impl<S: Service> Stack<S> {
    /// The layers of a server with `config` listening on `address`, over
    /// `tls` when there is one, serving what `make` makes.
    ///
    /// # Panics
    /// On a `--server-header` that [`Config::validate`] refuses
    /// ([`Server::bind_with`](super::Server::bind_with) checks it first).
    pub fn with_service(
        config: Config,
        address: SocketAddr,
        tls: Option<&Tls>,
        make: impl FnOnce(Making<'_>) -> S,
    ) -> Stack<S> {
        let memory = Arc::new(Memory::new(config.memory_limit, config.connection_memory()));
        Stack::on_account(config, address, tls, memory, make)
    }

    /// [`Stack::with_service`] charging another server's memory account
    /// (the admin address's, its server's): one account for the process.
    pub(super) fn on_account(
        config: Config,
        address: SocketAddr,
        tls: Option<&Tls>,
        memory: Arc<Memory>,
        make: impl FnOnce(Making<'_>) -> S,
    ) -> Stack<S> {
        let draining = Draining::default();
        let transport = Arc::new(Transport::default());
        let service = make(Making {
            config: &config,
            address,
            tls,
            memory: &memory,
            draining: &draining,
            transport: &transport,
        });
        let writer = Writer::new(
            config.strategy,
            config.idle_timeout.as_secs(),
            config
                .server_line()
                .expect("the configuration checked when the server bound"),
            memory.clone(),
        );
        let protocol = Protocol {
            observer: service.observer(),
            service,
            writer,
            memory,
            limits: config.session(),
            draining,
        };
        Stack {
            connections: Connections {
                protocol,
                timeouts: config.timeouts(),
                policy: config.policy(),
                idle: IdleConnections::default(),
                transport,
            },
            config,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// What every connection shares.
    pub fn connections(&self) -> &Connections<S> {
        &self.connections
    }

    /// What every session shares.
    pub fn protocol(&self) -> &Protocol<S> {
        &self.connections.protocol
    }

    /// The service served.
    pub fn service(&self) -> &S {
        &self.connections.protocol.service
    }

    /// The memory account.
    pub fn memory(&self) -> &Memory {
        &self.connections.protocol.memory
    }
}
