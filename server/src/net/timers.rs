//! The server's timers: one clock thread for the process wakes the tasks
//! whose deadline has come, scanning at most once per [`TICK`]. Not tokio's:
//! its time driver costs every worker's park, one per sequential request
//! (docs/results/instructions-and-profiles.md). A deadline is an atomic in
//! the timer's entry, written only when it comes *earlier* (or, by
//! [`Timer::poll_moved`], when a wait asks for it later). **Lazy firing**:
//! a fired entry says only that its deadline came; the task checks the
//! deadline in force, which may have moved later, and re-arms, so a request
//! that arrives in time costs no timer work.

use std::future::{poll_fn, Future};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::thread::Thread;
use std::time::Duration;

use atomic_waker::AtomicWaker;

use crate::clock::Moment;

/// The least time between two scans: the most a deadline fires late.
pub const TICK: Duration = Duration::from_millis(10);

/// No deadline: what an entry holds when it is not armed, or has fired.
const UNARMED: u64 = u64::MAX;

/// What the clock thread and one timer share.
#[derive(Debug)]
struct Armed {
    /// The deadline, in milliseconds, or `UNARMED`.
    at: AtomicU64,
    waker: AtomicWaker,
}

/// The clock thread's view of every timer.
struct Wheel {
    entries: Mutex<Entries>,
    /// When the thread wakes next (`UNARMED`: when woken); outside a scan,
    /// no later than any armed entry's deadline.
    next: AtomicU64,
    thread: Thread,
}

/// Every live timer's entry, and those dropped since they were last swept.
struct Entries {
    all: Vec<Arc<Armed>>,
    /// The length at which a new timer sweeps the dropped ones out (the
    /// thread may sleep while timers come and go).
    sweep_at: usize,
}

impl Entries {
    /// Drops the entries of dropped timers: only the wheel holds them.
    fn sweep(&mut self) {
        self.all.retain(|e| Arc::strong_count(e) > 1);
    }
}

/// The process's clock thread, started with the first timer.
fn wheel() -> &'static Wheel {
    static WHEEL: OnceLock<&'static Wheel> = OnceLock::new();
    WHEEL.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<&'static Wheel>();
        let thread = std::thread::Builder::new()
            .name("unflat-clock".into())
            .spawn(move || run(rx.recv().expect("the wheel is sent")))
            .expect("the clock thread starts");
        let wheel: &'static Wheel = Box::leak(Box::new(Wheel {
            entries: Mutex::new(Entries {
                all: Vec::new(),
                sweep_at: SWEEP_FIRST,
            }),
            next: AtomicU64::new(UNARMED),
            thread: thread.thread().clone(),
        }));
        tx.send(wheel)
            .expect("the clock thread waits for its wheel");
        wheel
    })
}

/// The length at which the entries are first swept by a new timer.
const SWEEP_FIRST: usize = 1024;

/// The clock thread: scans, wakes, sleeps until the next deadline.
fn run(wheel: &'static Wheel) {
    let tick = u64::try_from(TICK.as_millis()).unwrap_or(10);
    loop {
        // Invariant: `next` is UNARMED from here to the end of the scan, so
        // a timer armed meanwhile finds its deadline earlier and wakes the
        // thread (`Timer::arm`), whose park below then returns at once.
        wheel.next.store(UNARMED, Ordering::SeqCst);
        let scanned = Moment::now().millis();
        let mut earliest = UNARMED;
        {
            let mut entries = wheel.entries.lock().unwrap_or_else(|e| e.into_inner());
            entries.all.retain(|e| {
                // Only the wheel holds a dropped timer's entry.
                if Arc::strong_count(e) == 1 {
                    return false;
                }
                let at = e.at.load(Ordering::Acquire);
                if at <= scanned {
                    match e
                        .at
                        .compare_exchange(at, UNARMED, Ordering::AcqRel, Ordering::Acquire)
                    {
                        Ok(_) => e.waker.wake(),
                        // Moved since the load (`Timer::poll_moved`): kept
                        // in view, or the thread might sleep past it.
                        Err(moved) => earliest = earliest.min(moved),
                    }
                } else {
                    earliest = earliest.min(at);
                }
                true
            });
        }
        wheel.next.fetch_min(earliest, Ordering::SeqCst);
        // Sleep until the next deadline, and at least a tick.
        loop {
            let next = wheel.next.load(Ordering::SeqCst);
            if next == UNARMED {
                std::thread::park();
                continue;
            }
            let wake = next.max(scanned + tick);
            let now = Moment::now().millis();
            if now >= wake {
                break;
            }
            std::thread::park_timeout(Duration::from_millis(wake - now));
        }
    }
}

/// One task's timer: fires no later than the deadline it is armed for, and
/// wakes the task that polls it. A connection keeps one for every wait.
#[derive(Debug)]
pub struct Timer {
    entry: Arc<Armed>,
}

impl Default for Timer {
    fn default() -> Self {
        Timer::new()
    }
}

impl Timer {
    /// A timer not yet armed.
    pub fn new() -> Timer {
        let entry = Arc::new(Armed {
            at: AtomicU64::new(UNARMED),
            waker: AtomicWaker::new(),
        });
        let mut entries = wheel().entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.all.len() >= entries.sweep_at {
            entries.sweep();
            entries.sweep_at = SWEEP_FIRST.max(2 * entries.all.len());
        }
        entries.all.push(entry.clone());
        drop(entries);
        Timer { entry }
    }

    /// Makes the timer fire no later than `deadline`, moving it only when
    /// it would fire later (or not at all): a later deadline is seen when
    /// the timer fires early ([`Timer::poll_passed`]).
    #[inline]
    pub fn arm(&self, deadline: Moment) {
        let at = self.entry.at.load(Ordering::Relaxed);
        if deadline.millis() < at {
            self.entry.at.store(deadline.millis(), Ordering::Release);
            let wheel = wheel();
            if deadline.millis() < wheel.next.fetch_min(deadline.millis(), Ordering::SeqCst) {
                wheel.thread.unpark();
            }
        }
    }

    /// Ready once `deadline` has come; the timer is armed for it if it
    /// would fire later, and moved to it if it fires early.
    pub fn poll_passed(&self, deadline: Moment, cx: &mut Context<'_>) -> Poll<()> {
        let e = &self.entry;
        let at = e.at.load(Ordering::Acquire);
        if at > deadline.millis() {
            // Unarmed, fired early, or set for later: the clock decides.
            if Moment::now() >= deadline {
                return Poll::Ready(());
            }
            self.arm(deadline);
        }
        e.waker.register(cx.waker());
        // Fired between the first look and the registration: the wake may
        // have found no waker, so look at the clock again.
        if e.at.load(Ordering::Acquire) == UNARMED {
            if Moment::now() >= deadline {
                return Poll::Ready(());
            }
            self.arm(deadline);
        }
        Poll::Pending
    }

    /// [`Timer::poll_passed`], the timer moved to `deadline` when it was
    /// armed earlier too: for a deadline that moves on at every wait (the
    /// hold of a busy keep-alive connection), which lazy firing would wake
    /// once for every deadline it left behind. The earlier deadline is
    /// dropped: only for a timer that no other wait is armed for. A
    /// deadline already past fires at the clock thread's next scan, within
    /// a [`TICK`].
    pub fn poll_moved(&self, deadline: Moment, cx: &mut Context<'_>) -> Poll<()> {
        let at = self.entry.at.load(Ordering::Acquire);
        if at < deadline.millis() {
            // Invariant: the thread wakes no later than any armed deadline
            // (`Wheel::next`), so it still wakes by `at`, and sees the later
            // one then. Fired meanwhile (UNARMED): `poll_passed` arms anew.
            let _ = self.entry.at.compare_exchange(
                at,
                deadline.millis(),
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
        }
        self.poll_passed(deadline, cx)
    }

    /// Completes once `deadline` has come.
    pub async fn passed(&self, deadline: Moment) {
        poll_fn(|cx| self.poll_passed(deadline, cx)).await
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        // The wheel drops the entry at its next scan; the task's waker is
        // given back now, so that it does not keep the task's memory.
        self.entry.at.store(UNARMED, Ordering::Relaxed);
        drop(self.entry.waker.take());
    }
}

/// Completes after `d`.
pub async fn sleep(d: Duration) {
    Timer::new().passed(Moment::in_(d)).await
}

/// `fut`'s output, or `Err(Elapsed)` if `d` passes first.
pub async fn timeout<F: Future>(d: Duration, fut: F) -> Result<F::Output, Elapsed> {
    let deadline = Moment::in_(d);
    let timer = Timer::new();
    let mut fut = std::pin::pin!(fut);
    poll_fn(|cx| {
        if let Poll::Ready(out) = fut.as_mut().poll(cx) {
            return Poll::Ready(Ok(out));
        }
        timer.poll_passed(deadline, cx).map(|()| Err(Elapsed))
    })
    .await
}

/// A [`timeout`] that passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Elapsed;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_never_reaches_unarmed() {
        let now = Moment::now();
        assert!(now.after(Duration::from_millis(5)) > now);
        assert!(now.after(Duration::MAX).millis() < UNARMED);
        assert_eq!(now.since(now.after(Duration::from_secs(1))), Duration::ZERO);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_timer_fires_at_its_deadline_not_before() {
        let start = std::time::Instant::now();
        sleep(Duration::from_millis(50)).await;
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(45), "{took:?}");
        assert!(took < Duration::from_secs(2), "{took:?}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_timer_armed_early_fires_at_the_later_deadline() {
        let timer = Timer::new();
        timer.arm(Moment::in_(Duration::from_millis(10)));
        let start = std::time::Instant::now();
        timer.passed(Moment::in_(Duration::from_millis(80))).await;
        assert!(start.elapsed() >= Duration::from_millis(75));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_timer_moved_later_fires_at_the_later_deadline_only() {
        let timer = Timer::new();
        let start = std::time::Instant::now();
        // Far enough apart that a busy machine polls the second in time.
        let first = Moment::in_(Duration::from_millis(300));
        let woken = std::future::poll_fn(|cx| {
            assert!(timer.poll_moved(first, cx).is_pending());
            Poll::Ready(())
        });
        woken.await;
        // Moved on before the first deadline: no wake at it.
        let later = Moment::in_(Duration::from_millis(600));
        let mut polls = 0;
        std::future::poll_fn(|cx| {
            polls += 1;
            timer.poll_moved(later, cx)
        })
        .await;
        assert!(start.elapsed() >= Duration::from_millis(590));
        assert_eq!(polls, 2, "woken once, at the later deadline");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_timeout_returns_the_output_or_elapsed() {
        assert_eq!(timeout(Duration::from_secs(5), async { 7 }).await, Ok(7));
        let never = std::future::pending::<()>();
        assert_eq!(
            timeout(Duration::from_millis(20), never).await,
            Err(Elapsed)
        );
    }

    #[test]
    fn dropped_timers_leave_the_wheel() {
        let weak: Vec<_> = (0..100)
            .map(|_| {
                let t = Timer::new();
                t.arm(Moment::in_(Duration::from_millis(1)));
                Arc::downgrade(&t.entry)
            })
            .collect();
        // The clock thread scans at the deadline, and drops them.
        for _ in 0..100 {
            if weak.iter().all(|w| w.upgrade().is_none()) {
                return;
            }
            std::thread::sleep(TICK);
        }
        panic!("dropped timers' entries still held");
    }
}
