//! Naps: how a worker waits for work under pipelined load (`--nap`).
//!
//! A worker asleep in `epoll_wait` is woken by the client's next write, and
//! the wake is the client's cost: an interrupt to the worker's core, in a VM
//! guest an exit to the host inside the client's `write`. A worker that
//! answers pipelined batches faster than its clients send them runs dry and
//! sleeps every few batches, and its clients pay a wake each time
//! (docs/results/pipelined.md). After a stretch of work that earns one
//! ([`earns`]), the worker sleeps `--nap` on its own timer before it waits:
//! the writes that come meanwhile wake no one, and the next stretch answers
//! them together.
//!
//! What a nap costs is latency: a request that comes during one waits for
//! its end. Only a stretch at least as long as the nap earns one, so no
//! request waits longer for a nap than the requests of the stretch before
//! waited for their turn; a worker that never runs dry never naps; a
//! client that sends one request at a time is never napped on — it waits
//! for every answer, and a nap would be all its latency; nor are clients
//! whose connections a stretch mostly answered: they would wait on the
//! nap with nothing else to read.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Transport;

/// The least requests a stretch's reads must carry on average for it to
/// earn a nap: pipelined batches, whose clients have a batch of answers to
/// read while the worker naps.
const DEPTH: u64 = 2;

/// The most of the worker's connections a stretch may have answered for
/// it to earn a nap, as a fraction: one in `SPREAD`. The others' clients
/// still have answers of earlier stretches to read while the worker naps;
/// a stretch that answered most of them leaves their clients waiting on
/// the worker, which a nap would stall. (Two, with naps of 75 µs: with
/// pipelined batches from 16 connections to one worker no rate lower than
/// without naps; from 50, longer stretches than a third allows still earn
/// one, so fewer naps, each answering more; docs/results/pipelined.md.)
const SPREAD: u64 = 2;

/// The kernel may end a sleep later by the thread's timer slack (50 µs by
/// default on Linux); a worker's is a tenth of its nap.
const SLACK_PARTS: u32 = 10;

/// The worker's stretch of work under way: since it last woke, what its
/// connections answered.
struct Stretch {
    began: Cell<Option<Instant>>,
    turns: Cell<u64>,
    requests: Cell<u64>,
}

/// Naps taken by every worker of the process (`unflat_worker_naps_total`).
static TAKEN: AtomicU64 = AtomicU64::new(0);

/// Naps taken so far by every worker of the process.
#[cfg(feature = "metrics")]
pub(crate) fn taken() -> u64 {
    TAKEN.load(Ordering::Relaxed)
}

thread_local! {
    static STRETCH: Stretch = const {
        Stretch {
            began: Cell::new(None),
            turns: Cell::new(0),
            requests: Cell::new(0),
        }
    };
}

/// Counts, for the worker running it, a connection's turn that answered
/// `requests` from what it had read.
#[inline]
pub(crate) fn turn(requests: u64) {
    STRETCH.with(|s| {
        s.turns.set(s.turns.get() + 1);
        s.requests.set(s.requests.get() + requests);
    });
}

/// Whether a stretch `busy` long, whose `turns` answered `requests`, of a
/// worker with `connections` open, earns a nap of `nap`: as long as the
/// nap, pipelined, and spread over few of the connections.
fn earns(nap: Duration, busy: Duration, turns: u64, requests: u64, connections: u64) -> bool {
    turns > 0 && busy >= nap && requests >= DEPTH * turns && turns * SPREAD <= connections
}

/// The worker wakes: a stretch begins.
fn woke() {
    STRETCH.with(|s| {
        s.began.set(Some(Instant::now()));
        s.turns.set(0);
        s.requests.set(0);
    });
}

/// The worker has nothing left to do: it naps if the stretch earned it,
/// with `connections` open on each worker.
fn parking(nap: Duration, connections: u64) {
    let earned = STRETCH.with(|s| {
        let busy = s.began.take().map(|t| t.elapsed());
        busy.is_some_and(|busy| earns(nap, busy, s.turns.get(), s.requests.get(), connections))
    });
    if earned {
        TAKEN.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(nap);
    }
}

/// Makes the `workers` of `runtime` nap for `nap` when a stretch earns it
/// (zero: never); `transport` counts the connections open. The thread that
/// drives a current-thread runtime is its worker: the slack it is given is
/// restored when the returned guard drops.
pub(crate) fn install(
    runtime: &mut tokio::runtime::Builder,
    nap: Duration,
    workers: usize,
    transport: Arc<Transport>,
) -> Option<Slack> {
    if nap.is_zero() {
        return None;
    }
    let slack = u64::try_from((nap / SLACK_PARTS).as_nanos()).unwrap_or(u64::MAX);
    runtime
        // A worker thread of the runtime's own ends with it: no slack to
        // put back.
        .on_thread_start(move || {
            set_slack(slack);
        })
        .on_thread_unpark(woke)
        .on_thread_park(move || {
            // Connections are not bound to a worker: each is taken to
            // have its share.
            parking(nap, transport.open_connections() / workers as u64)
        });
    Some(Slack::set(slack))
}

/// This thread's timer slack before [`Slack::set`] changed it, put back
/// when dropped.
pub(crate) struct Slack {
    was: Option<u64>,
}

impl Slack {
    /// Sets this thread's timer slack to `ns` nanoseconds, keeping what
    /// it was.
    fn set(ns: u64) -> Slack {
        Slack { was: set_slack(ns) }
    }
}

impl Drop for Slack {
    fn drop(&mut self) {
        if let Some(was) = self.was {
            set_slack(was);
        }
    }
}

/// Sets this thread's timer slack to `ns` nanoseconds (Linux; elsewhere
/// the kernel's own stays) and says what it was. Not fatal when refused: a
/// nap is then longer by the kernel's slack.
fn set_slack(ns: u64) -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        use rustix::thread::{current_timer_slack, set_current_timer_slack};
        let was = current_timer_slack().ok();
        set_current_timer_slack(std::num::NonZeroU64::new(ns)).ok()?;
        was
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = ns;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAP: Duration = Duration::from_micros(75);

    #[test]
    fn a_long_pipelined_stretch_earns_a_nap() {
        assert!(earns(NAP, NAP, 4, 64, 16));
        assert!(earns(NAP, Duration::from_millis(1), 12, 2 * 12, 50));
    }

    #[test]
    fn a_stretch_shorter_than_the_nap_earns_none() {
        assert!(!earns(NAP, NAP - Duration::from_nanos(1), 4, 64, 50));
    }

    #[test]
    fn requests_one_at_a_time_earn_none_however_long() {
        assert!(!earns(NAP, Duration::from_millis(1), 10, 10, 1000));
        assert!(!earns(NAP, Duration::from_millis(1), 10, 19, 1000));
    }

    #[test]
    fn a_stretch_that_answered_nothing_earns_none() {
        assert!(!earns(NAP, Duration::from_millis(1), 0, 0, 50));
    }

    #[test]
    fn a_stretch_that_answered_over_half_the_connections_earns_none() {
        assert!(earns(NAP, NAP, 8, 128, 16));
        assert!(!earns(NAP, NAP, 9, 144, 16));
        assert!(earns(NAP, NAP, 1, 16, 2));
        assert!(!earns(NAP, NAP, 2, 32, 2));
    }

    #[test]
    fn a_stretch_counts_its_turns_from_the_wake() {
        turn(16);
        woke();
        turn(16);
        turn(0);
        STRETCH.with(|s| {
            assert_eq!((s.turns.get(), s.requests.get()), (2, 16));
            assert!(s.began.get().is_some());
        });
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_slack_set_is_put_back() {
        use rustix::thread::current_timer_slack;
        let was = current_timer_slack().unwrap();
        {
            let _slack = Slack::set(5_000);
            assert_eq!(current_timer_slack().unwrap(), 5_000);
        }
        assert_eq!(current_timer_slack().unwrap(), was);
    }
}
