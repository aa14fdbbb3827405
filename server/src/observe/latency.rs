//! The request latency histogram of `/metrics`, from a request's complete
//! head to its response queued, by label (a service's route) and status
//! class (labels bounded by construction). Each worker observes into its
//! own histograms. The clock is the coarse one, read once per turn of the
//! session (the precise one cost 3 to 6 % of a request:
//! docs/operations.md), so the buckets start at 5 ms: the histogram tells
//! the slow requests from the rest.

use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(feature = "metrics")]
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet};
#[cfg(feature = "metrics")]
use prometheus_client::metrics::MetricType;

/// The buckets' upper bounds, in microseconds: Prometheus's defaults, 5 ms
/// to 10 s, above the clock's tick.
const BOUNDS_US: [u64; 11] = [
    5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 5_000_000,
    10_000_000,
];

/// Buckets, the last for what is above every bound (`+Inf`).
const BUCKETS: usize = BOUNDS_US.len() + 1;

/// The status classes, as labels: 1xx to 5xx (and 6xx to 9xx, which a
/// `Status` may be, counted as 5xx).
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// One label's histograms on one worker thread, by status class.
#[derive(Debug)]
pub(super) struct Histogram {
    buckets: [[AtomicU64; BUCKETS]; CLASSES.len()],
    sum_us: [AtomicU64; CLASSES.len()],
}

impl Histogram {
    /// Histograms at zero.
    pub(super) fn new() -> Histogram {
        Histogram {
            buckets: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            sum_us: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Counts `n` responses of status `code` that took `us` microseconds
    /// each.
    #[inline]
    pub(super) fn observe(&self, code: u16, us: u64, n: u64) {
        let bucket = BOUNDS_US.partition_point(|&bound| bound < us);
        let class = class(code);
        self.buckets[class][bucket].fetch_add(n, Ordering::Relaxed);
        self.sum_us[class].fetch_add(us.saturating_mul(n), Ordering::Relaxed);
    }
}

/// The index of status `code`'s class in [`CLASSES`].
fn class(code: u16) -> usize {
    (usize::from(code / 100)).clamp(1, CLASSES.len()) - 1
}

/// One label's and class's histogram, summed over the shards.
#[cfg(feature = "metrics")]
struct Summed {
    sum: f64,
    count: u64,
    buckets: Vec<(f64, u64)>,
}

#[cfg(feature = "metrics")]
impl EncodeMetric for Summed {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_histogram::<NoLabelSet>(self.sum, self.count, &self.buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// Writes the histograms of the (label, class) pairs seen so far:
/// `labels` gives each label's value and its histogram on every worker.
#[cfg(feature = "metrics")]
pub(super) fn encode<'a, H>(
    labels: impl Iterator<Item = (&'static str, H)>,
    encoder: &mut DescriptorEncoder,
) -> Result<(), std::fmt::Error>
where
    H: Iterator<Item = &'a Histogram>,
{
    let mut family = encoder.encode_descriptor(
        "request_duration_seconds",
        "Time from a request's complete head to its response queued, by route and status class.",
        None,
        MetricType::Histogram,
    )?;
    for (name, histograms) in labels {
        let mut counts = [[0u64; BUCKETS]; CLASSES.len()];
        let mut sums_us = [0u64; CLASSES.len()];
        for h in histograms {
            for c in 0..CLASSES.len() {
                for (n, b) in counts[c].iter_mut().zip(&h.buckets[c]) {
                    *n += b.load(Ordering::Relaxed);
                }
                sums_us[c] += h.sum_us[c].load(Ordering::Relaxed);
            }
        }
        for (c, label) in CLASSES.iter().enumerate() {
            let (counts, sum_us) = (counts[c], sums_us[c]);
            let count: u64 = counts.iter().sum();
            if count == 0 {
                continue;
            }
            let bounds = BOUNDS_US
                .iter()
                .map(|&us| us as f64 / 1e6)
                .chain([f64::INFINITY]);
            let summed = Summed {
                sum: sum_us as f64 / 1e6,
                count,
                buckets: bounds.zip(counts).collect(),
            };
            let labels = [("route", name), ("status_class", *label)];
            summed.encode(family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use unflat::head::Status;

    #[test]
    fn a_response_lands_in_the_first_bucket_at_or_above_it() {
        let h = Histogram::new();
        h.observe(Status::OK.code(), 5_000, 1);
        h.observe(Status::OK.code(), 5_001, 1);
        h.observe(Status::NOT_FOUND.code(), 60_000_000, 1);
        let at = |c: usize, b: usize| h.buckets[c][b].load(Ordering::Relaxed);
        assert_eq!((at(1, 0), at(1, 1)), (1, 1));
        assert_eq!(at(3, BUCKETS - 1), 1);
        assert_eq!(h.sum_us[1].load(Ordering::Relaxed), 10_001);
        assert_eq!(h.sum_us[3].load(Ordering::Relaxed), 60_000_000);
        assert_eq!(class(Status::CONTINUE.code()), 0);
    }
}
