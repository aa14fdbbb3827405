//! The site's counters and `GET /metrics`: requests by route and status,
//! the memory account, body builds, log lines dropped, and the core's
//! transport counters. **Nothing shared is written per request**: what a
//! request adds to lives in one [`Shard`] per worker thread ([`PerWorker`]),
//! relaxed atomics on lines of their own, summed by a scrape
//! (docs/results/history.md, "Scaling to many cores"); only a status outside
//! [`COMMON`] costs a shared write. A scrape writes OpenMetrics through
//! `prometheus-client`'s [`Collector`].

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
use super::exposition::{to_prometheus_text, Exposition};
use super::latency;
use super::process::Process;
use super::routes::Route;
use crate::memory::{Memory, Part};
use crate::net::{PerWorker, Transport};
use crate::response::Strategy;

/// The status codes counted: 100 to 999, what a [`Status`] can be.
const STATUSES: usize = 900;

/// The statuses each worker counts in its own shard: every status the
/// server's own replies and refusals send.
const COMMON: [u16; 18] = [
    100, 200, 204, 304, 400, 404, 405, 408, 411, 413, 414, 417, 431, 500, 501, 503, 505, 206,
];

/// For each status code (`code - 100`), its slot in a shard plus one; 0:
/// counted in the shared table.
const SLOT_OF: [u8; STATUSES] = {
    let mut t = [0u8; STATUSES];
    let mut i = 0;
    while i < COMMON.len() {
        t[COMMON[i] as usize - 100] = i as u8 + 1;
        i += 1;
    }
    t
};

/// One worker thread's counters.
#[derive(Debug)]
struct Shard {
    /// Responses by route and common status ([`COMMON`]).
    requests: [[AtomicU64; COMMON.len()]; Route::ALL.len()],
    latency: latency::Shard,
}

impl Shard {
    fn new() -> Shard {
        Shard {
            requests: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            latency: latency::Shard::new(),
        }
    }
}

/// The counters, shared by every connection (and cloned as cheaply: the
/// site renders what its observer counts).
#[derive(Clone, Debug)]
pub struct Metrics {
    counters: Arc<Counters>,
    registry: Arc<Registry>,
}

#[derive(Debug)]
struct Counters {
    /// Per worker thread: what every request adds to.
    shards: PerWorker<Shard>,
    /// Responses by route and status code (`code - 100`), of the statuses
    /// not in [`COMMON`].
    requests: Box<[[AtomicU64; STATUSES]]>,
    /// The core's: bytes written, connections open and reset.
    transport: Arc<Transport>,
    strategy: Strategy,
    memory: Arc<Memory>,
    bodies: Arc<Bodies>,
}

/// Responses a connection has queued and not yet counted, all of one
/// route, status and latency ([`Metrics::tally`]).
#[derive(Debug, Default)]
pub struct Tally {
    /// Latency in µs (from bit 16), status code (bits 4 to 15) and route
    /// index (bits 0 to 3), valid while `n > 0`.
    key: u64,
    n: u64,
}

impl Metrics {
    /// Counters at zero, reading `memory`, `bodies` and `transport` when
    /// scraped.
    pub fn new(
        strategy: Strategy,
        memory: Arc<Memory>,
        bodies: Arc<Bodies>,
        transport: Arc<Transport>,
    ) -> Metrics {
        let counters = Arc::new(Counters {
            shards: PerWorker::new(Shard::new),
            requests: Route::ALL
                .iter()
                .map(|_| std::array::from_fn(|_| AtomicU64::new(0)))
                .collect(),
            transport,
            strategy,
            memory,
            bodies,
        });
        let mut registry = Registry::default();
        registry
            .sub_registry_with_prefix("unflat")
            .register_collector(Box::new(Collect(counters.clone())));
        registry.register_collector(Box::new(Process::new()));
        Metrics {
            counters,
            registry: Arc::new(registry),
        }
    }

    /// Counts a response of `status` to a request of `route`, queued `us`
    /// microseconds after the request's head was complete.
    #[inline]
    pub fn request(&self, route: Route, status: Status, us: u64) {
        self.requests(route, status.code(), us, 1);
    }

    /// Counts `n` responses of status `code` to requests of `route`, each
    /// queued `us` microseconds after its request's head was complete.
    #[inline]
    fn requests(&self, route: Route, code: u16, us: u64, n: u64) {
        let shard = self.counters.shards.mine();
        shard.latency.observe(route, code, us, n);
        let code = usize::from(code).saturating_sub(100);
        match SLOT_OF.get(code) {
            Some(&slot @ 1..) => add(&shard.requests[route.index()][usize::from(slot) - 1], n),
            Some(_) => add(&self.counters.requests[route.index()][code], n),
            None => {}
        }
    }

    /// Counts a response as [`Metrics::request`] does, into the
    /// connection's `tally` first: the responses of a batch of pipelined
    /// requests alike in route, status and latency are counted as one
    /// ([`Metrics::count`] at the batch's end).
    #[inline]
    pub fn tally(&self, tally: &mut Tally, route: Route, status: Status, us: u64) {
        if us >= 1 << 47 {
            // Too long a latency to pack: counted alone, now.
            self.requests(route, status.code(), us, 1);
            return;
        }
        // One comparison per response: route, status and latency packed.
        let key = (us << 16) | u64::from(status.code()) << 4 | route.index() as u64;
        if tally.n > 0 && tally.key == key {
            tally.n += 1;
            return;
        }
        self.count(tally);
        *tally = Tally { key, n: 1 };
    }

    /// Adds what `tally` holds to the counters, and empties it.
    #[inline]
    pub fn count(&self, tally: &mut Tally) {
        if tally.n == 0 {
            return;
        }
        let key = tally.key;
        let route = Route::ALL[(key & 0xf) as usize];
        // A status's code, as `tally` packed it.
        self.requests(route, ((key >> 4) & 0xfff) as u16, key >> 16, tally.n);
        tally.n = 0;
    }

    /// The counters and the process's figures in the text format `format`.
    pub fn render(&self, format: Exposition) -> String {
        let mut text = String::with_capacity(4096);
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        match format {
            Exposition::OpenMetrics => text,
            Exposition::Prometheus => to_prometheus_text(&text),
        }
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
        c.encode_builds(&mut encoder)?;
        encode_log(&mut encoder)?;
        latency::encode(c.shards.all().map(|s| &s.latency), &mut encoder)
    }
}

/// Log lines dropped because stderr did not take them (`crate::log`).
fn encode_log(encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    let dropped = ConstCounter::new(crate::log::dropped());
    dropped.encode(encoder.encode_descriptor(
        "log_lines_dropped",
        "Log lines (access log and others) dropped because stderr did not take them and the log's buffer was full.",
        None,
        dropped.metric_type(),
    )?)
}

fn load(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

/// Adds `n` to a counter. An atomic add even on a shard: more threads than
/// shards share one, and a count must never be lost.
#[inline]
fn add(a: &AtomicU64, n: u64) {
    a.fetch_add(n, Ordering::Relaxed);
}

fn gauge(v: usize) -> ConstGauge {
    ConstGauge::new(i64::try_from(v).unwrap_or(i64::MAX))
}

impl Counters {
    /// Responses to `route` of the status code `code - 100`, summed.
    fn requests(&self, route: Route, code: usize) -> u64 {
        let shared = load(&self.requests[route.index()][code]);
        match SLOT_OF[code] {
            0 => shared,
            slot => {
                let slot = usize::from(slot) - 1;
                let sharded = self
                    .shards
                    .all()
                    .map(|s| load(&s.requests[route.index()][slot]));
                sharded.fold(shared, u64::wrapping_add)
            }
        }
    }

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
            for slot in 0..STATUSES {
                let n = self.requests(route, slot);
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

    /// The transport's: bytes written, connections open, connections
    /// reset.
    fn encode_connections(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let transport = &self.transport;
        let written = ConstCounter::new(transport.bytes_written());
        let mut family = encoder.encode_descriptor(
            "response_bytes",
            "Bytes of responses (heads and bodies) the sockets took, by strategy.",
            None,
            written.metric_type(),
        )?;
        written.encode(family.encode_family(&[("strategy", self.strategy.name())])?)?;
        let open = gauge(transport.open_connections() as usize);
        open.encode(encoder.encode_descriptor(
            "open_connections",
            "Connections accepted and not yet closed.",
            None,
            open.metric_type(),
        )?)?;
        let resets = ConstCounter::new(transport.send_timeouts());
        resets.encode(encoder.encode_descriptor(
            "send_timeout_resets",
            "Connections reset because the peer took no bytes for --send-timeout.",
            None,
            resets.metric_type(),
        )?)?;
        let slow = ConstCounter::new(transport.too_slow());
        slow.encode(encoder.encode_descriptor(
            "min_send_rate_resets",
            "Connections reset because the peer acknowledged less than --min-send-rate.",
            None,
            slow.metric_type(),
        )?)
    }

    /// The memory account: its parts (bodies split into cached and only
    /// referenced), its limits, its refusals.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics() -> Metrics {
        let memory = Arc::new(Memory::new(1 << 30, 1 << 20));
        let bodies = Bodies::new(memory.clone(), 2000, 1);
        Metrics::new(Strategy::Direct, memory, bodies, Arc::default())
    }

    /// The server's own series (the process's figures differ from one
    /// rendering to the next).
    fn series(m: &Metrics) -> Vec<String> {
        let text = m.render(Exposition::Prometheus);
        text.lines()
            .filter(|l| {
                l.starts_with("unflat_") && !l.contains("bytes") && !l.contains("connections")
            })
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn a_tally_counts_what_each_response_counted_one_by_one_counts() {
        let responses = [
            // Too long a latency to pack: counted at once.
            (Route::Unmatched, Status::REQUEST_TIMEOUT, 1 << 50),
            (Route::Unmatched, Status::REQUEST_TIMEOUT, 1 << 50),
            (Route::EndString, Status::OK, 0),
            (Route::EndString, Status::OK, 0),
            (Route::EndString, Status::OK, 3000),
            (Route::EndString, Status::NOT_FOUND, 3000),
            (Route::Help, Status::NOT_FOUND, 3000),
            (Route::Help, Status::NOT_FOUND, 3000),
        ];
        let (one_by_one, tallied) = (metrics(), metrics());
        let mut tally = Tally::default();
        for (i, &(route, status, us)) in responses.iter().enumerate() {
            one_by_one.request(route, status, us);
            tallied.tally(&mut tally, route, status, us);
            if i == 6 {
                // A batch ends between responses alike.
                tallied.count(&mut tally);
            }
        }
        assert_ne!(
            series(&one_by_one),
            series(&tallied),
            "the last batch not yet counted"
        );
        tallied.count(&mut tally);
        tallied.count(&mut tally);
        assert_eq!(series(&one_by_one), series(&tallied));
    }
}
