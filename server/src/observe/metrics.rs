//! The counters of `/metrics`: responses by label (a service's route) and
//! status, the transport's counters, the memory account, log lines
//! dropped, the process, and what the service reports of its own
//! ([`Report`]). **Nothing shared is written per request**: what a
//! request adds to lives in one [`Shard`] per worker thread ([`PerWorker`]),
//! relaxed atomics on lines of their own, summed by a scrape
//! (docs/results/history.md, "Scaling to many cores"); only a status outside
//! [`COMMON`] costs a shared write. A scrape writes OpenMetrics through
//! `prometheus-client`'s `Collector`, with the `metrics` feature; without
//! it the counters count, and nothing renders them.

#[cfg(feature = "metrics")]
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[cfg(feature = "metrics")]
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{counter::ConstCounter, gauge::ConstGauge},
    registry::Registry,
};
use unflat::head::Status;

#[cfg(feature = "metrics")]
use super::exposition::{to_prometheus_text, Exposition};
use super::latency;
#[cfg(feature = "metrics")]
use super::process::Process;
use super::Label;
use crate::memory::Memory;
#[cfg(feature = "metrics")]
use crate::memory::Part;
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

/// One worker thread's counters: a row per label, by its index (one
/// bounds check per count).
type Shard = Box<[Row]>;

/// What one worker counts of one label's responses.
#[derive(Debug)]
struct Row {
    /// Responses by common status ([`COMMON`]).
    requests: [AtomicU64; COMMON.len()],
    latency: latency::Histogram,
}

impl Row {
    fn new() -> Row {
        Row {
            requests: std::array::from_fn(|_| AtomicU64::new(0)),
            latency: latency::Histogram::new(),
        }
    }
}

/// The counters, shared by every connection (and cloned as cheaply: a
/// service renders what its observer counts), responses counted under the
/// labels `L`.
#[derive(Debug)]
pub struct Metrics<L: Label = ()> {
    counters: Arc<Counters>,
    #[cfg(feature = "metrics")]
    registry: Arc<Registry>,
    labels: std::marker::PhantomData<fn(L)>,
}

impl<L: Label> Clone for Metrics<L> {
    fn clone(&self) -> Self {
        Metrics {
            counters: self.counters.clone(),
            #[cfg(feature = "metrics")]
            registry: self.registry.clone(),
            labels: std::marker::PhantomData,
        }
    }
}

/// What a service adds to its `/metrics` beside the core's counters (a
/// cache of its own, its builds).
pub trait Report: Send + Sync + std::fmt::Debug + 'static {
    /// Of the bytes charged to bodies ([`Part::Bodies`]), those the
    /// service's cache keeps, and the cache's limit; `None` without a
    /// cache (every body is then counted as referenced only).
    fn cache(&self) -> Option<(usize, usize)> {
        None
    }

    /// Writes the service's own families, after the memory account's
    /// (their names under the same `unflat_` prefix).
    #[cfg(feature = "metrics")]
    fn encode(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let _ = encoder;
        Ok(())
    }
}

/// The server crate's features this build has, as `build_info` names them.
#[cfg(feature = "metrics")]
fn features() -> String {
    let all = [
        ("simdutf", cfg!(feature = "simdutf")),
        ("tls", cfg!(feature = "tls")),
        ("tls-ring", cfg!(feature = "tls-ring")),
        ("self-signed", cfg!(feature = "self-signed")),
        ("jemalloc", cfg!(feature = "jemalloc")),
        ("metrics", cfg!(feature = "metrics")),
        ("cli", cfg!(feature = "cli")),
        ("json", cfg!(feature = "json")),
        ("form", cfg!(feature = "form")),
    ];
    let on: Vec<&str> = all.iter().filter(|(_, on)| *on).map(|(n, _)| *n).collect();
    on.join(",")
}

/// What every request adds to, and what a scrape reads beside it. Without
/// the `metrics` feature nothing scrapes: what only a scrape reads is kept
/// all the same, so that a `Metrics` is made alike with or without it.
#[derive(Debug)]
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
struct Counters {
    /// Per worker thread: what every request adds to.
    shards: PerWorker<Shard>,
    /// Responses by label and status code (`code - 100`), of the statuses
    /// not in [`COMMON`].
    requests: Box<[[AtomicU64; STATUSES]]>,
    /// Each label's value, by index.
    names: Box<[&'static str]>,
    /// The core's: bytes written, connections open and reset.
    transport: Arc<Transport>,
    strategy: Strategy,
    memory: Arc<Memory>,
    report: Option<Arc<dyn Report>>,
}

/// Responses a connection has queued and not yet counted, all of one
/// label, status and latency ([`Metrics::tally`]).
#[derive(Debug, Default)]
pub struct Tally {
    /// Latency in µs (from bit 20), status code (bits 8 to 19) and label
    /// index (bits 0 to 7), valid while `n > 0`.
    key: u64,
    n: u64,
}

impl<L: Label> Metrics<L> {
    /// Counters at zero, reading `memory`, `transport` and what the
    /// service reports (`report`) when scraped; `strategy` labels the
    /// bytes written.
    ///
    /// # Panics
    /// If `L` has more than 256 labels ([`Label::ALL`]).
    pub fn new(
        strategy: Strategy,
        memory: Arc<Memory>,
        transport: Arc<Transport>,
        report: Option<Arc<dyn Report>>,
    ) -> Metrics<L> {
        let labels = L::ALL.len();
        assert!(
            (1..=256).contains(&labels),
            "{labels} labels: from 1 to 256 are counted"
        );
        for (i, label) in L::ALL.iter().enumerate() {
            assert_eq!(label.index(), i, "{label:?} is at {i} in Label::ALL");
        }
        assert!(
            L::REFUSED.index() < labels,
            "Label::REFUSED not in Label::ALL"
        );
        let counters = Arc::new(Counters {
            shards: PerWorker::new(|| (0..labels).map(|_| Row::new()).collect()),
            requests: (0..labels)
                .map(|_| std::array::from_fn(|_| AtomicU64::new(0)))
                .collect(),
            names: L::ALL.iter().map(|l| l.name()).collect(),
            transport,
            strategy,
            memory,
            report,
        });
        #[cfg(feature = "metrics")]
        let registry = {
            let mut registry = Registry::default();
            registry
                .sub_registry_with_prefix("unflat")
                .register_collector(Box::new(Collect(counters.clone())));
            registry.register_collector(Box::new(Process::new()));
            Arc::new(registry)
        };
        Metrics {
            counters,
            #[cfg(feature = "metrics")]
            registry,
            labels: std::marker::PhantomData,
        }
    }

    /// Counts a response of `status` under `label`, queued `us`
    /// microseconds after its request's head was complete.
    #[inline]
    pub fn request(&self, label: L, status: Status, us: u64) {
        self.requests(label.index(), status.code(), us, 1);
    }

    /// Counts `n` responses of status `code` under the label at `label`,
    /// each queued `us` microseconds after its request's head was complete.
    #[inline]
    fn requests(&self, label: usize, code: u16, us: u64, n: u64) {
        let row = &self.counters.shards.mine()[label];
        row.latency.observe(code, us, n);
        let code = usize::from(code).saturating_sub(100);
        match SLOT_OF.get(code) {
            Some(&slot @ 1..) => add(&row.requests[usize::from(slot) - 1], n),
            Some(_) => add(&self.counters.requests[label][code], n),
            None => {}
        }
    }

    /// Counts a response as [`Metrics::request`] does, into the
    /// connection's `tally` first: the responses of a batch of pipelined
    /// requests alike in label, status and latency are counted as one
    /// ([`Metrics::count`] at the batch's end).
    #[inline]
    pub fn tally(&self, tally: &mut Tally, label: L, status: Status, us: u64) {
        if us >= 1 << 43 {
            // Too long a latency to pack: counted alone, now.
            self.requests(label.index(), status.code(), us, 1);
            return;
        }
        // One comparison per response: label, status and latency packed
        // (`Metrics::new` checked that every index is below 256).
        debug_assert!(label.index() < 256);
        let key = (us << 20) | u64::from(status.code()) << 8 | label.index() as u64;
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
        // A label's index and a status's code, as `tally` packed them.
        self.requests(
            (key & 0xff) as usize,
            ((key >> 8) & 0xfff) as u16,
            key >> 20,
            tally.n,
        );
        tally.n = 0;
    }

    /// The counters and the process's figures in the text format `format`.
    #[cfg(feature = "metrics")]
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
#[cfg(feature = "metrics")]
#[derive(Debug)]
struct Collect(Arc<Counters>);

#[cfg(feature = "metrics")]
impl Collector for Collect {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let c = &self.0;
        c.encode_requests(&mut encoder)?;
        c.encode_connections(&mut encoder)?;
        c.encode_memory(&mut encoder)?;
        if let Some(report) = &c.report {
            report.encode(&mut encoder)?;
        }
        encode_log(&mut encoder)?;
        counter(
            &mut encoder,
            "worker_naps",
            "Naps the workers took (--nap): sleeps on their own timer after a pipelined stretch of work, in place of a wait the next request wakes.",
            crate::net::nap::taken(),
        )?;
        let labels = c
            .names
            .iter()
            .enumerate()
            .map(|(label, &name)| (name, c.shards.all().map(move |s| &s[label].latency)));
        latency::encode(labels, &mut encoder)
    }
}

/// Log lines dropped because stderr did not take them (`crate::log`).
#[cfg(feature = "metrics")]
fn encode_log(encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    counter(
        encoder,
        "log_lines_dropped",
        "Log lines (access log and others) dropped because stderr did not take them and the log's buffer was full.",
        crate::log::dropped(),
    )
}

/// A family of one counter without labels, `name` with `help`, at `n`.
#[cfg(feature = "metrics")]
fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    n: u64,
) -> Result<(), std::fmt::Error> {
    let counter = ConstCounter::new(n);
    counter.encode(encoder.encode_descriptor(name, help, None, counter.metric_type())?)
}

#[cfg(feature = "metrics")]
fn load(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

/// Adds `n` to a counter. An atomic add even on a shard: more threads than
/// shards share one, and a count must never be lost.
#[inline]
fn add(a: &AtomicU64, n: u64) {
    a.fetch_add(n, Ordering::Relaxed);
}

#[cfg(feature = "metrics")]
fn gauge(v: usize) -> ConstGauge {
    ConstGauge::new(i64::try_from(v).unwrap_or(i64::MAX))
}

/// A scrape's reading.
#[cfg(feature = "metrics")]
impl Counters {
    /// Responses under the label at `label` of the status code
    /// `code - 100`, summed.
    fn requests(&self, label: usize, code: usize) -> u64 {
        let shared = load(&self.requests[label][code]);
        match SLOT_OF[code] {
            0 => shared,
            slot => {
                let slot = usize::from(slot) - 1;
                let sharded = self.shards.all().map(|s| load(&s[label].requests[slot]));
                sharded.fold(shared, u64::wrapping_add)
            }
        }
    }

    /// Responses by label and status, for the pairs seen so far.
    fn encode_requests(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "requests",
            "Responses sent, by route and status.",
            None,
            ConstCounter::new(0u64).metric_type(),
        )?;
        let mut code = String::new();
        for (label, name) in self.names.iter().enumerate() {
            for slot in 0..STATUSES {
                let n = self.requests(label, slot);
                if n == 0 {
                    continue;
                }
                code.clear();
                write!(code, "{}", slot + 100)?;
                let labels = [("route", *name), ("status", code.as_str())];
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
        counter(
            encoder,
            "send_timeout_resets",
            "Connections reset because the peer took no bytes for --send-timeout.",
            transport.send_timeouts(),
        )?;
        counter(
            encoder,
            "min_send_rate_resets",
            "Connections reset because the peer acknowledged less than --min-send-rate.",
            transport.too_slow(),
        )?;
        let (loaded, refused) = transport.reloads();
        let mut family = encoder.encode_descriptor(
            "tls_reloads",
            "Certificate reloads asked by SIGHUP, by result: loaded, or refused (the certificate in use kept; the log says why).",
            None,
            ConstCounter::new(0u64).metric_type(),
        )?;
        for (result, n) in [("loaded", loaded), ("refused", refused)] {
            ConstCounter::new(n).encode(family.encode_family(&[("result", result)])?)?;
        }
        if let Some(at) = transport.certificate_expiry() {
            let expiry = ConstGauge::new(at);
            expiry.encode(encoder.encode_descriptor(
                "tls_certificate_expiry_timestamp",
                "When the certificate in use (the chain's first) expires: its notAfter.",
                Some(&prometheus_client::registry::Unit::Seconds),
                expiry.metric_type(),
            )?)?;
        }
        // The exporters' convention: a constant 1, what was built as labels.
        let info = gauge(1);
        let mut family = encoder.encode_descriptor(
            "build_info",
            "The server's version and the features it was built with (always 1).",
            None,
            info.metric_type(),
        )?;
        info.encode(family.encode_family(&[
            ("version", env!("CARGO_PKG_VERSION")),
            ("features", features().as_str()),
        ])?)
    }

    /// The memory account: its parts (bodies split into cached and only
    /// referenced), its limits, its refusals.
    fn encode_memory(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let memory = &self.memory;
        let bodies = memory.used(Part::Bodies);
        let cache = self.report.as_ref().and_then(|r| r.cache());
        let cached = cache.map_or(0, |(cached, _)| cached.min(bodies));
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
            "The memory account's limits: the whole (--memory-limit), connections' buffers (--connection-memory), the service's cache when it has one (the demo's --cache-bytes).",
            None,
            gauge_type,
        )?;
        let limits = [
            ("total", Some(memory.limit())),
            (Part::Connections.label(), Some(memory.connections_limit())),
            ("cache", cache.map(|(_, limit)| limit)),
        ];
        for (part, value) in limits {
            if let Some(value) = value {
                gauge(value).encode(family.encode_family(&[("part", part)])?)?;
            }
        }
        counter(
            encoder,
            "memory_refusals",
            "Requests answered 503 and connections refused because the memory account was at a limit.",
            memory.refusals(),
        )
    }
}

// Through what a scrape renders.
#[cfg(all(test, feature = "metrics"))]
mod tests {
    use super::*;

    /// Three labels, as a service's routes.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Route {
        Help,
        Text,
        Unmatched,
    }

    impl Label for Route {
        const ALL: &'static [Route] = &[Route::Help, Route::Text, Route::Unmatched];
        const REFUSED: Route = Route::Unmatched;

        fn index(self) -> usize {
            self as usize
        }

        fn name(self) -> &'static str {
            ["/", "/text", "unmatched"][self as usize]
        }
    }

    /// A cache of 700 bytes of 2000, and builds.
    #[derive(Debug)]
    struct Cache;

    impl Report for Cache {
        fn cache(&self) -> Option<(usize, usize)> {
            Some((700, 2000))
        }

        fn encode(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
            let builds = ConstCounter::new(3u64);
            builds.encode(encoder.encode_descriptor(
                "body_builds",
                "Bodies built.",
                None,
                builds.metric_type(),
            )?)
        }
    }

    fn metrics(report: Option<Arc<dyn Report>>) -> Metrics<Route> {
        let memory = Arc::new(Memory::new(1 << 30, 1 << 20));
        Metrics::new(Strategy::Direct, memory, Arc::default(), report)
    }

    /// The server's own series (the process's figures differ from one
    /// rendering to the next).
    fn series<L: Label>(m: &Metrics<L>) -> Vec<String> {
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
            (Route::Text, Status::OK, 0),
            (Route::Text, Status::OK, 0),
            (Route::Text, Status::OK, 3000),
            (Route::Text, Status::NOT_FOUND, 3000),
            (Route::Help, Status::NOT_FOUND, 3000),
            (Route::Help, Status::NOT_FOUND, 3000),
            // A status outside the common ones, in the shared table.
            (Route::Help, Status::from_code(299).unwrap(), (1 << 43) - 1),
        ];
        let (one_by_one, tallied) = (metrics(None), metrics(None));
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
        let counted = series(&tallied);
        for line in [
            "unflat_requests_total{route=\"/text\",status=\"200\"} 3",
            "unflat_requests_total{route=\"/\",status=\"299\"} 1",
            "unflat_requests_total{route=\"unmatched\",status=\"408\"} 2",
        ] {
            assert!(
                counted.iter().any(|l| l == line),
                "no {line} in {counted:#?}"
            );
        }
    }

    /// Labels listed out of their order.
    #[derive(Clone, Copy, Debug)]
    enum Swapped {
        A,
        B,
    }

    impl Label for Swapped {
        const ALL: &'static [Swapped] = &[Swapped::B, Swapped::A];
        const REFUSED: Swapped = Swapped::A;

        fn index(self) -> usize {
            self as usize
        }

        fn name(self) -> &'static str {
            "swapped"
        }
    }

    #[test]
    #[should_panic(expected = "is at 0 in Label::ALL")]
    fn labels_listed_out_of_their_order_are_refused() {
        let memory = Arc::new(Memory::new(1 << 30, 1 << 20));
        let _ = Metrics::<Swapped>::new(Strategy::Direct, memory, Arc::default(), None);
    }

    #[test]
    fn without_labels_every_response_is_counted_under_all() {
        let m: Metrics = Metrics::new(
            Strategy::Direct,
            Arc::new(Memory::new(1 << 30, 1 << 20)),
            Arc::default(),
            None,
        );
        m.request((), Status::OK, 10);
        m.request((), Status::OK, 10);
        assert!(series(&m)
            .iter()
            .any(|l| l == "unflat_requests_total{route=\"all\",status=\"200\"} 2"));
    }

    #[test]
    fn a_report_splits_the_bodies_and_adds_its_families() {
        let text = |m: &Metrics<Route>| m.render(Exposition::Prometheus);
        let without = text(&metrics(None));
        assert!(without.contains("unflat_memory_bytes{part=\"bodies_cached\"} 0"));
        assert!(!without.contains("part=\"cache\"") && !without.contains("body_builds"));
        let with = text(&metrics(Some(Arc::new(Cache))));
        assert!(with.contains("unflat_memory_limit_bytes{part=\"cache\"} 2000"));
        assert!(with.contains("unflat_body_builds_total 3"), "{with}");
    }
}
