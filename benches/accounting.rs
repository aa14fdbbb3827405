//! What a request's accounting costs as threads are added: the counters a
//! request adds to (`Metrics::request`, its latency histogram included,
//! what the site counts once per response, and the core's
//! `Transport::written`, once per write) on 1, 2 and 8 threads at once, beside
//! one atomic counter every thread adds to — what the counters were before
//! they were kept per worker.
//!
//! The figure is CPU time per accounted request, summed over the threads'
//! own CPU clocks (`CLOCK_THREAD_CPUTIME_ID`) and divided by the requests:
//! flat when the threads do not contend, growing when they fight over a
//! cache line (each add then waits for the line to come from another
//! core). On a machine with fewer cores than threads the extra threads take
//! turns, which costs them no CPU per request.
//!
//!     cargo bench --bench accounting
//!     cargo bench --bench accounting -- --test    # each case once, checked
//!
//! Writes criterion's reports under target/criterion/accounting.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use unflat::head::Status;
use unflat_server::observe::{Exposition, Metrics};
use unflat_server::{Config, Stack};

/// The binary's demo site, whose counters are measured: the bench uses a
/// part of it, and none of its unit tests.
#[path = "../server/src/demo/mod.rs"]
#[allow(dead_code, unused_imports)]
mod demo;

use demo::{Options, Route, Site};

/// This thread's CPU time.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write to.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Runs `account` `iters` times on each of `threads` threads at once;
/// their CPU time summed, divided by `threads` (so that criterion's time
/// per iteration is CPU per accounted request).
fn on_threads(threads: usize, iters: u64, account: &(impl Fn(u64) + Sync)) -> Duration {
    let start = Barrier::new(threads);
    let total: Duration = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    let before = thread_cpu();
                    for i in 0..iters {
                        account(std::hint::black_box(i));
                    }
                    thread_cpu() - before
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    total / threads as u32
}

fn accounting(c: &mut Criterion) {
    let address = "127.0.0.1:3000".parse().unwrap();
    let options = Options::default();
    let stack = Stack::with_service(Config::default(), address, None, |m| {
        Site::made(&options, m)
    });
    let metrics: &Metrics<Route> = stack.service().metrics();
    let transport = &stack.connections().transport;
    let shared = AtomicU64::new(0);
    let mut group = c.benchmark_group("accounting");
    for threads in [1, 2, 8] {
        group.bench_function(BenchmarkId::new("per-worker", threads), |b| {
            b.iter_custom(|iters| {
                on_threads(threads, iters, &|i| {
                    metrics.request(Route::EndString, Status::OK, 40 + (i & 63));
                    transport.written(64 + (i & 7) as usize);
                })
            })
        });
        group.bench_function(BenchmarkId::new("one-shared-atomic", threads), |b| {
            b.iter_custom(|iters| {
                on_threads(threads, iters, &|i| {
                    shared.fetch_add(1, Ordering::Relaxed);
                    shared.fetch_add(64 + (i & 7), Ordering::Relaxed);
                })
            })
        });
    }
    group.finish();
    // The per-worker counters, summed, are what /metrics shows.
    let text = metrics.render(Exposition::OpenMetrics);
    assert!(
        text.contains("unflat_requests_total{route=\"/end-string\",status=\"200\"}"),
        "the counted requests are missing from /metrics:\n{text}"
    );
}

criterion_group!(benches, accounting);
criterion_main!(benches);
