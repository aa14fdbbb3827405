//! What a reply waits for before it can be written, as a future the
//! connection awaits (the demo's: a body being built on the blocking pool).

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use super::guard::{guarded, log, Panicked};

/// What a reply waits for before it can be written, and what it then
/// becomes (`T`). The connection awaits it, holding no thread, and gives
/// back what it made (`Session::resume`).
pub struct Job<T>(Pin<Box<dyn Future<Output = T> + Send>>);

/// What a [`Job`] made, or that its work panicked (then logged, and its
/// request answered 500).
#[derive(Debug)]
pub struct Finished<T>(pub(crate) Result<T, Panicked>);

impl<T: 'static> Job<T> {
    /// A job of `work`, which the connection awaits.
    pub fn new(work: impl Future<Output = T> + Send + 'static) -> Job<T> {
        Job(Box::pin(work))
    }

    /// A job of work already boxed (no second allocation).
    pub fn boxed(work: Pin<Box<dyn Future<Output = T> + Send>>) -> Job<T> {
        Job(work)
    }

    /// Waits for the work; on a tokio runtime, whose blocking pool builds.
    /// A panic while it is polled is caught here: the connection answers
    /// 500 and goes on.
    pub async fn run(mut self) -> Finished<T> {
        let work = &mut self.0;
        let polled = std::future::poll_fn(|cx| match guarded(|| work.as_mut().poll(cx)) {
            Ok(Poll::Ready(made)) => Poll::Ready(Ok(made)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => Poll::Ready(Err(log(&*payload, "a job", None))),
        });
        Finished(polled.await)
    }

    /// Waits for the work outside an async context (a session driven in
    /// memory), on a runtime of this thread's own.
    pub fn wait(self) -> Finished<T> {
        block_on(self.run())
    }
}

/// Runs `work` to its end on a runtime of this thread's own (with IO and
/// time), outside an async context: for a session driven in memory.
pub(crate) fn block_on<F: Future>(work: F) -> F::Output {
    thread_local! {
        static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for sessions driven in memory");
    }
    RUNTIME.with(|rt| rt.block_on(work))
}

impl<T> std::fmt::Debug for Job<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Job")
    }
}
