//! The transport's counters, kept by the core for whoever exposes them:
//! connections open, bytes the sockets took, send timeouts, readers reset
//! below the minimum rate. Bytes are counted
//! per worker thread ([`PerWorker`]): a cache line every core writes per
//! request stops a server scaling (docs/results/history.md).

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};

/// What every connection counts as it opens, writes and ends.
#[derive(Debug)]
pub struct Transport {
    /// Bytes the sockets took (heads and bodies), per worker thread.
    written: PerWorker<AtomicU64>,
    open: AtomicU64,
    send_timeouts: AtomicU64,
    too_slow: AtomicU64,
    /// Certificate reloads (SIGHUP): loaded, refused.
    reloads: [AtomicU64; 2],
    /// The `notAfter` of the certificate in use, in Unix seconds;
    /// `i64::MIN` for none.
    not_after: AtomicI64,
}

impl Default for Transport {
    fn default() -> Transport {
        Transport {
            written: PerWorker::new(|| AtomicU64::new(0)),
            open: AtomicU64::new(0),
            send_timeouts: AtomicU64::new(0),
            too_slow: AtomicU64::new(0),
            reloads: [AtomicU64::new(0), AtomicU64::new(0)],
            not_after: AtomicI64::new(i64::MIN),
        }
    }
}

impl Transport {
    /// Counts a connection opened, until the [`Open`] it returns is dropped.
    pub fn open(&self) -> Open<'_> {
        self.open.fetch_add(1, Ordering::Relaxed);
        Open(self)
    }

    /// Counts `n` bytes a socket took.
    #[inline]
    pub fn written(&self, n: usize) {
        // An atomic add even on a shard: more threads than shards share
        // one, and a count must never be lost.
        self.written.mine().fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Counts a connection reset after `--send-timeout`.
    pub fn send_timed_out(&self) {
        self.send_timeouts.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a connection reset below `--min-send-rate`.
    pub fn read_too_slowly(&self) {
        self.too_slow.fetch_add(1, Ordering::Relaxed);
    }

    /// Connections reset so far because the peer acknowledged less than
    /// `--min-send-rate`.
    pub fn too_slow(&self) -> u64 {
        self.too_slow.load(Ordering::Relaxed)
    }

    /// Connections accepted and not yet closed.
    pub fn open_connections(&self) -> u64 {
        self.open.load(Ordering::Relaxed)
    }

    /// Bytes the sockets took so far.
    pub fn bytes_written(&self) -> u64 {
        let shards = self.written.all().map(|n| n.load(Ordering::Relaxed));
        shards.fold(0, u64::wrapping_add)
    }

    /// Counts a certificate reload (SIGHUP): `loaded`, or refused (the
    /// certificate in use kept).
    pub fn reloaded(&self, loaded: bool) {
        self.reloads[usize::from(!loaded)].fetch_add(1, Ordering::Relaxed);
    }

    /// Notes when the certificate in use expires (`notAfter`, in Unix
    /// seconds; `None`: no certificate, or one whose date could not be
    /// read).
    pub fn certificate_expires(&self, not_after: Option<i64>) {
        let at = not_after.unwrap_or(i64::MIN);
        self.not_after.store(at, Ordering::Relaxed);
    }

    /// When the certificate in use expires, as noted.
    pub fn certificate_expiry(&self) -> Option<i64> {
        Some(self.not_after.load(Ordering::Relaxed)).filter(|&at| at != i64::MIN)
    }

    /// Certificate reloads so far: loaded, refused.
    pub fn reloads(&self) -> (u64, u64) {
        let [ok, failed] = &self.reloads;
        (ok.load(Ordering::Relaxed), failed.load(Ordering::Relaxed))
    }

    /// Connections reset so far because the peer took no bytes for
    /// `--send-timeout`.
    pub fn send_timeouts(&self) -> u64 {
        self.send_timeouts.load(Ordering::Relaxed)
    }
}

/// An open connection, counted from its start until it ends, however it
/// ends.
#[derive(Debug)]
pub struct Open<'a>(&'a Transport);

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The fewest shards: one each for the first 16 threads that count, even
/// on a machine with fewer cores (`--workers` may exceed them).
const FEWEST_SHARDS: usize = 16;

/// The most shards: more threads than this share them.
const MOST_SHARDS: usize = 256;

/// One `T` per worker thread, each on cache lines no other thread writes:
/// what a request adds to, counted without a line shared between cores.
#[derive(Debug)]
pub struct PerWorker<T> {
    shards: Box<[Line<T>]>,
}

/// 128 bytes: two cache lines, as the adjacent-line prefetcher pairs them.
#[derive(Debug)]
#[repr(align(128))]
struct Line<T>(T);

impl<T> PerWorker<T> {
    /// A shard of `make`'s for each thread the machine runs at once, within
    /// 16 and 256.
    pub fn new(mut make: impl FnMut() -> T) -> PerWorker<T> {
        let shards = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(FEWEST_SHARDS, MOST_SHARDS);
        PerWorker {
            shards: (0..shards).map(|_| Line(make())).collect(),
        }
    }

    /// This thread's shard.
    #[inline]
    pub fn mine(&self) -> &T {
        &self.shards[thread_index() % self.shards.len()].0
    }

    /// Every shard, for a reader to sum.
    pub fn all(&self) -> impl Iterator<Item = &T> + Clone {
        self.shards.iter().map(|line| &line.0)
    }
}

/// The index of this thread's shard: threads are numbered as they first
/// count, and take the shards in turn.
#[inline]
fn thread_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    INDEX.with(|i| *i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_every_thread_are_summed_and_a_connection_counts_while_open() {
        let t = Transport::default();
        std::thread::scope(|s| {
            for _ in 0..20 {
                s.spawn(|| t.written(3));
            }
        });
        assert_eq!(t.bytes_written(), 60);
        let open = t.open();
        assert_eq!(t.open_connections(), 1);
        drop(open);
        assert_eq!(t.open_connections(), 0);
        t.send_timed_out();
        assert_eq!(t.send_timeouts(), 1);
    }

    #[test]
    fn reloads_are_counted_by_result() {
        let t = Transport::default();
        t.reloaded(false);
        t.reloaded(true);
        t.reloaded(false);
        assert_eq!(t.reloads(), (1, 2), "loaded, refused");
    }
}
