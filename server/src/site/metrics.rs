//! The server's counters, and `GET /metrics`: requests by route and
//! status, response bytes written, open connections, the memory account by
//! part and its limits, refusals for want of memory, body builds, send
//! timeouts.
//!
//! The request path only adds to atomics (relaxed: each counter is
//! independent, and a scrape may see one a request ahead of another); no
//! lock and no map is touched per request. A scrape reads them and writes
//! the OpenMetrics text format, which Prometheus reads, through
//! `prometheus-client`'s [`Collector`]: only the (route, status) pairs seen
//! so far are listed.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use unflat::head::Status;

use super::bodies::Bodies;
use super::routes::Route;
use crate::memory::{Memory, Part};
use crate::response::Strategy;

/// The status codes counted: 100 to 999, what a [`Status`] can be.
const STATUSES: usize = 900;

/// The counters, shared by every connection.
#[derive(Debug)]
pub struct Metrics {
    counters: Arc<Counters>,
    registry: Registry,
}

#[derive(Debug)]
struct Counters {
    /// Responses by route and status code (`code - 100`).
    requests: Box<[[AtomicU64; STATUSES]]>,
    /// Bytes the sockets took (heads and bodies).
    written: AtomicU64,
    /// Connections accepted and not yet closed.
    open: AtomicU64,
    /// Connections reset because the peer stopped reading.
    send_timeouts: AtomicU64,
    strategy: Strategy,
    memory: Arc<Memory>,
    bodies: Arc<Bodies>,
}

impl Metrics {
    /// Counters at zero, for a server writing by `strategy`, whose memory
    /// `memory` counts and whose bodies are `bodies`.
    pub fn new(strategy: Strategy, memory: Arc<Memory>, bodies: Arc<Bodies>) -> Metrics {
        let counters = Arc::new(Counters {
            requests: Route::ALL
                .iter()
                .map(|_| std::array::from_fn(|_| AtomicU64::new(0)))
                .collect(),
            written: AtomicU64::new(0),
            open: AtomicU64::new(0),
            send_timeouts: AtomicU64::new(0),
            strategy,
            memory,
            bodies,
        });
        let mut registry = Registry::with_prefix("unflat");
        registry.register_collector(Box::new(Collect(counters.clone())));
        Metrics { counters, registry }
    }

    /// Counts a response of `status` to a request of `route`.
    pub fn request(&self, route: Route, status: Status) {
        let slot = usize::from(status.code()).saturating_sub(100);
        if let Some(n) = self.counters.requests[route.index()].get(slot) {
            n.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts `n` bytes the socket took.
    pub fn written(&self, n: usize) {
        self.counters.written.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Counts an open connection until the guard is dropped.
    pub fn open_connection(&self) -> OpenConnection {
        self.counters.open.fetch_add(1, Ordering::Relaxed);
        OpenConnection(self.counters.clone())
    }

    /// Counts a connection reset after `--send-timeout`.
    pub fn send_timeout(&self) {
        self.counters.send_timeouts.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters in the OpenMetrics text format.
    pub fn render(&self) -> String {
        let mut text = String::with_capacity(2048);
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }
}

/// An open connection, counted until dropped (however the connection
/// ends).
#[derive(Debug)]
pub struct OpenConnection(Arc<Counters>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Reads the counters on each scrape.
#[derive(Debug)]
struct Collect(Arc<Counters>);

impl Collector for Collect {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let c = &self.0;
        c.encode_requests(&mut encoder)?;
        c.encode_connections(&mut encoder)?;
        c.encode_memory(&mut encoder)?;
        c.encode_builds(&mut encoder)
    }
}

/// A counter's value.
fn load(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

/// A gauge of `v`.
fn gauge(v: usize) -> ConstGauge {
    ConstGauge::new(i64::try_from(v).unwrap_or(i64::MAX))
}

impl Counters {
    /// Responses by route and status, for the pairs seen so far.
    fn encode_requests(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "requests",
            "Responses sent, by route and status.",
            None,
            ConstCounter::new(0u64).metric_type(),
        )?;
        let mut code = String::new();
        for route in Route::ALL {
            for (slot, n) in self.requests[route.index()].iter().enumerate() {
                let n = load(n);
                if n == 0 {
                    continue;
                }
                code.clear();
                write!(code, "{}", slot + 100)?;
                let labels = [("route", route.label()), ("status", code.as_str())];
                ConstCounter::new(n).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }

    /// Bytes written, connections open, connections reset.
    fn encode_connections(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let written = ConstCounter::new(load(&self.written));
        let mut family = encoder.encode_descriptor(
            "response_bytes",
            "Bytes of responses (heads and bodies) the sockets took, by strategy.",
            None,
            written.metric_type(),
        )?;
        written.encode(family.encode_family(&[("strategy", self.strategy.name())])?)?;
        let open = gauge(load(&self.open) as usize);
        open.encode(encoder.encode_descriptor(
            "open_connections",
            "Connections accepted and not yet closed.",
            None,
            open.metric_type(),
        )?)?;
        let resets = ConstCounter::new(load(&self.send_timeouts));
        resets.encode(encoder.encode_descriptor(
            "send_timeout_resets",
            "Connections reset because the peer took no bytes for --send-timeout.",
            None,
            resets.metric_type(),
        )?)
    }

    /// The memory account: its parts, the bodies split into those the
    /// cache holds and those only responses in flight keep alive; its
    /// limits; its refusals.
    fn encode_memory(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let memory = &self.memory;
        let bodies = memory.used(Part::Bodies);
        let cached = self.bodies.cached_bytes().min(bodies);
        let gauge_type = gauge(0).metric_type();
        let mut family = encoder.encode_descriptor(
            "memory_bytes",
            "Bytes charged to the memory account, by part: bodies cached, bodies referenced only by responses in flight, bodies being built, connections' buffers beyond their bases (grown read buffers, queued output and frames, request bodies, TLS records of a write) — together within --memory-limit — and open connections' bases, counted beside it.",
            None,
            gauge_type,
        )?;
        for (part, value) in [
            ("bodies_cached", cached),
            ("bodies_referenced", bodies - cached),
            (Part::Building.label(), memory.used(Part::Building)),
            (Part::Connections.label(), memory.used(Part::Connections)),
            (Part::Bases.label(), memory.used(Part::Bases)),
        ] {
            gauge(value).encode(family.encode_family(&[("part", part)])?)?;
        }
        let mut family = encoder.encode_descriptor(
            "memory_limit_bytes",
            "The memory account's limits: the whole (--memory-limit), connections' buffers (--connection-memory), the cache (--cache-bytes).",
            None,
            gauge_type,
        )?;
        for (part, value) in [
            ("total", memory.limit()),
            (Part::Connections.label(), memory.connections_limit()),
            ("cache", self.bodies.cache_limit()),
        ] {
            gauge(value).encode(family.encode_family(&[("part", part)])?)?;
        }
        let refusals = ConstCounter::new(memory.refusals());
        refusals.encode(encoder.encode_descriptor(
            "memory_refusals",
            "Requests answered 503 and connections refused because the memory account was at a limit.",
            None,
            refusals.metric_type(),
        )?)
    }

    /// Bodies built, and requests that shared a build in flight.
    fn encode_builds(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (builds, shared) = self.bodies.builds();
        let mut family = encoder.encode_descriptor(
            "body_builds",
            "Bodies built (shared=false), and requests that waited for a build already in flight instead (shared=true).",
            None,
            ConstCounter::new(0u64).metric_type(),
        )?;
        for (label, n) in [("false", builds), ("true", shared)] {
            ConstCounter::new(n).encode(family.encode_family(&[("shared", label)])?)?;
        }
        Ok(())
    }
}
