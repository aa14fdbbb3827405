//! The connections that give way at `--max-connections`: the listener asks
//! the one idle longest to close (as nginx does), rather than leave a new
//! client in the backlog. A connection registers once (one lock); going idle
//! and busy is one store to its own slot, no lock and no clock read: it
//! stores its idle deadline, and the earliest is the one idle longest.
//! The same slot tells it the server stops ([`IdleConnections::stop_all`]):
//! one waker per connection for both, no allocation of its own for the
//! shutdown's.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use atomic_waker::AtomicWaker;

use crate::clock::Moment;

/// Every open connection's slot.
#[derive(Debug, Default)]
pub struct IdleConnections {
    slots: Mutex<Slots>,
    /// Set once the server stops: every connection is told.
    stopping: AtomicBool,
}

#[derive(Debug, Default)]
struct Slots {
    open: Vec<Option<Arc<Slot>>>,
    free: Vec<usize>,
}

#[derive(Debug, Default)]
struct Slot {
    /// When its wait for the next request times out, in clock
    /// milliseconds plus one; 0 while it is busy.
    idle_until: AtomicU64,
    asked: AtomicBool,
    waker: AtomicWaker,
}

/// One connection's slot, removed when dropped.
#[derive(Debug)]
pub struct Registration<'a> {
    set: &'a IdleConnections,
    index: usize,
    slot: Arc<Slot>,
}

impl IdleConnections {
    fn lock(&self) -> MutexGuard<'_, Slots> {
        // Each update is one push or one take: a poisoned lock is whole.
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A slot for a connection that opens.
    pub fn register(&self) -> Registration<'_> {
        let slot = Arc::new(Slot::default());
        let mut slots = self.lock();
        let index = match slots.free.pop() {
            Some(i) => {
                slots.open[i] = Some(slot.clone());
                i
            }
            None => {
                slots.open.push(Some(slot.clone()));
                slots.open.len() - 1
            }
        };
        Registration {
            set: self,
            index,
            slot,
        }
    }

    /// Tells every connection, open now or opened later, that the server
    /// stops (each hears it through its registration's `poll_stopped`).
    pub fn stop_all(&self) {
        // The flag first: a connection that registers its waker after the
        // wake-ups below sees it when it looks again.
        self.stopping.store(true, Ordering::SeqCst);
        for slot in self.lock().open.iter().flatten() {
            slot.waker.wake();
        }
    }

    /// Asks the connection idle longest, and not asked yet, to close;
    /// whether there was one.
    pub fn ask_longest_idle(&self) -> bool {
        let slots = self.lock();
        let longest = slots
            .open
            .iter()
            .flatten()
            .filter(|s| !s.asked.load(Ordering::Relaxed))
            .filter_map(|s| match s.idle_until.load(Ordering::Relaxed) {
                0 => None,
                until => Some((until, s)),
            })
            .min_by_key(|&(until, _)| until);
        let Some((_, slot)) = longest else {
            return false;
        };
        slot.asked.store(true, Ordering::Relaxed);
        slot.waker.wake();
        true
    }
}

impl Registration<'_> {
    /// The connection waits for its next request, until `deadline` (its
    /// idle timeout).
    pub fn idle(&self, deadline: Moment) {
        self.slot
            .idle_until
            .store(deadline.millis() + 1, Ordering::Relaxed);
    }

    /// The connection has a request in progress. An ask that came too late
    /// (the request arrived first) is forgotten: the connection is busy,
    /// and the listener asks another.
    pub fn busy(&self) {
        self.slot.idle_until.store(0, Ordering::Relaxed);
        self.slot.asked.store(false, Ordering::Relaxed);
    }

    /// Ready once the listener has asked the connection to give way.
    pub fn poll_asked(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.poll_set(&self.slot.asked, cx)
    }

    /// Completes once the listener has asked the connection to give way.
    pub async fn asked(&self) {
        std::future::poll_fn(|cx| self.poll_asked(cx)).await
    }

    /// Ready once the server stops ([`IdleConnections::stop_all`]).
    pub fn poll_stopped(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.poll_set(&self.set.stopping, cx)
    }

    /// Ready once `flag` is set; else the slot's waker is this task's, and
    /// the flag is looked at again: one set while the waker was being
    /// registered is not missed (whoever sets it wakes after setting).
    fn poll_set(&self, flag: &AtomicBool, cx: &mut Context<'_>) -> Poll<()> {
        if flag.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        self.slot.waker.register(cx.waker());
        match flag.load(Ordering::SeqCst) {
            true => Poll::Ready(()),
            false => Poll::Pending,
        }
    }

    /// Completes once the server stops.
    pub async fn stopped(&self) {
        std::future::poll_fn(|cx| self.poll_stopped(cx)).await
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        let mut slots = self.set.lock();
        slots.open[self.index] = None;
        slots.free.push(self.index);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_idle_is_asked_and_the_busy_never() {
        let set = IdleConnections::default();
        let (a, b, c) = (set.register(), set.register(), set.register());
        let at = |ms| Moment::now().after(std::time::Duration::from_millis(ms));
        b.idle(at(10));
        c.idle(at(20));
        a.idle(at(0));
        a.busy();
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(set.ask_longest_idle());
        assert!(b.poll_asked(&mut cx).is_ready(), "idle longest");
        assert!(c.poll_asked(&mut cx).is_pending());
        assert!(set.ask_longest_idle(), "then the next");
        assert!(c.poll_asked(&mut cx).is_ready());
        assert!(!set.ask_longest_idle(), "the busy one is not asked");
        assert!(a.poll_asked(&mut cx).is_pending());
        drop((b, c));
        let d = set.register();
        assert_eq!(set.lock().open.len(), 3, "slots are reused");
        drop((a, d));
    }

    /// Woken and ready once the server stops, busy or idle; one that opens
    /// after is ready at once.
    #[test]
    fn every_connection_hears_the_server_stop() {
        use std::sync::atomic::AtomicUsize;
        use std::task::Wake;
        struct Count(AtomicUsize);
        impl Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let set = IdleConnections::default();
        let (a, b) = (set.register(), set.register());
        b.idle(Moment::now());
        let woken = Arc::new(Count(AtomicUsize::new(0)));
        let waker = std::task::Waker::from(woken.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(a.poll_stopped(&mut cx).is_pending());
        assert!(b.poll_stopped(&mut cx).is_pending());
        set.stop_all();
        assert_eq!(woken.0.load(Ordering::SeqCst), 2, "each told");
        assert!(a.poll_stopped(&mut cx).is_ready());
        assert!(b.poll_stopped(&mut cx).is_ready());
        assert!(b.poll_asked(&mut cx).is_pending(), "not asked to give way");
        assert!(set.register().poll_stopped(&mut cx).is_ready());
    }
}
