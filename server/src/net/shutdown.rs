//! The shutdown signal: a flag every connection reads between requests,
//! and the future the accept loop awaits, which registers with the shared
//! [`Notify`] once (its lock) and afterwards only loads the flag. The
//! accept loop then tells the connections waiting for a request, through
//! their slots (`give_way.rs`).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use tokio::sync::futures::Notified;
use tokio::sync::Notify;

#[derive(Debug, Default)]
struct Inner {
    triggered: AtomicBool,
    notify: Notify,
}

/// Triggers a shutdown: connections finish the responses they are writing,
/// idle ones close at once.
#[derive(Debug)]
pub struct Trigger(Arc<Inner>);

/// One connection's view of the shutdown signal.
#[derive(Clone, Debug)]
pub struct Shutdown(Arc<Inner>);

/// A new, untriggered signal.
pub fn channel() -> (Trigger, Shutdown) {
    let inner = Arc::new(Inner::default());
    (Trigger(inner.clone()), Shutdown(inner))
}

impl Trigger {
    /// Tells every connection to finish.
    pub fn trigger(&self) {
        // The flag first: a waiter woken below, or one that registers after
        // this, sees it.
        self.0.triggered.store(true, Ordering::Release);
        self.0.notify.notify_waiters();
    }
}

impl Drop for Trigger {
    /// A trigger that is gone can never fire: treat that as a shutdown, so
    /// that no connection waits for it forever.
    fn drop(&mut self) {
        self.trigger();
    }
}

impl Shutdown {
    /// True once shutdown has begun.
    pub fn is_triggered(&self) -> bool {
        self.0.triggered.load(Ordering::Acquire)
    }

    /// A future that completes once shutdown has begun: the accept loop's
    /// (connections hear of it through their slot, `give_way.rs`, with no
    /// allocation of their own). Polls after the first cost an atomic load.
    pub fn stopped(&self) -> Stopped<'_> {
        Stopped {
            flag: &self.0.triggered,
            notified: Box::pin(self.0.notify.notified()),
            registered: None,
        }
    }
}

/// See [`Shutdown::stopped`].
#[derive(Debug)]
pub struct Stopped<'a> {
    flag: &'a AtomicBool,
    notified: Pin<Box<Notified<'a>>>,
    /// The waker the `Notify` holds for this future.
    registered: Option<Waker>,
}

impl Future for Stopped<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.flag.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        if self
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            // The Notify will wake this task, which then sees the flag.
            return Poll::Pending;
        }
        // First poll, or another task: (re)register, under the Notify's lock.
        if self.notified.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        self.registered = Some(cx.waker().clone());
        if self.flag.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_pinned_waiter_wakes_on_trigger_and_after_it() {
        let (trigger, shutdown) = channel();
        let waiter = tokio::spawn({
            let shutdown = shutdown.clone();
            async move {
                let stopped = shutdown.stopped();
                tokio::pin!(stopped);
                // Polled many times before the trigger, as a connection does.
                for _ in 0..3 {
                    let poll = futures_poll(stopped.as_mut()).await;
                    assert!(poll.is_pending());
                }
                stopped.await;
            }
        });
        tokio::task::yield_now().await;
        trigger.trigger();
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("woken")
            .unwrap();
        assert!(shutdown.is_triggered());
        // Created after the trigger: ready at once.
        shutdown.stopped().await;
    }

    #[tokio::test]
    async fn dropping_the_trigger_stops_waiters() {
        let (trigger, shutdown) = channel();
        drop(trigger);
        assert!(shutdown.is_triggered());
        shutdown.stopped().await;
    }

    /// Polls `f` once.
    async fn futures_poll<F: Future + Unpin>(mut f: F) -> Poll<F::Output> {
        std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut f).poll(cx))).await
    }
}
