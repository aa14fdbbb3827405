//! The server's counters, and `GET /metrics`: requests by route and
//! status, response bytes written, open connections, queued bytes, send
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

use crate::budget::Budget;
use crate::config::Strategy;
use crate::routes::Route;

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
    budget: Arc<Budget>,
}

impl Metrics {
    /// Counters at zero, for a server writing by `strategy` whose queued
    /// bytes `budget` sums.
    pub fn new(strategy: Strategy, budget: Arc<Budget>) -> Metrics {
        let counters = Arc::new(Counters {
            requests: Route::ALL
                .iter()
                .map(|_| std::array::from_fn(|_| AtomicU64::new(0)))
                .collect(),
            written: AtomicU64::new(0),
            open: AtomicU64::new(0),
            send_timeouts: AtomicU64::new(0),
            strategy,
            budget,
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
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);

        let counter = ConstCounter::new(0u64);
        let mut family = encoder.encode_descriptor(
            "requests",
            "Responses sent, by route and status.",
            None,
            counter.metric_type(),
        )?;
        let mut code = String::new();
        for route in Route::ALL {
            for (slot, n) in c.requests[route.index()].iter().enumerate() {
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

        let written = ConstCounter::new(load(&c.written));
        let mut family = encoder.encode_descriptor(
            "response_bytes",
            "Bytes of responses (heads and bodies) the sockets took, by strategy.",
            None,
            written.metric_type(),
        )?;
        written.encode(family.encode_family(&[("strategy", c.strategy.name())])?)?;

        let gauges = [
            (
                "open_connections",
                "Connections accepted and not yet closed.",
                load(&c.open),
            ),
            (
                "queued_bytes",
                "Bytes of copied or encoded output all connections hold queued (reported in 16 KiB granules).",
                c.budget.held() as u64,
            ),
        ];
        for (name, help, value) in gauges {
            let gauge = ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }

        let resets = ConstCounter::new(load(&c.send_timeouts));
        resets.encode(encoder.encode_descriptor(
            "send_timeout_resets",
            "Connections reset because the peer took no bytes for --send-timeout.",
            None,
            resets.metric_type(),
        )?)?;
        Ok(())
    }
}
