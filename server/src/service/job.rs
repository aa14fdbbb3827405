//! What a reply waits for before it can be written, as a future the
//! connection awaits (the demo's: a body being built on the blocking pool).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::guard::{guarded, log, Panicked};

/// What a reply waits for before it can be written, and what it then
/// becomes (`T`). The connection awaits it, holding no thread, and gives
/// back what it made (`Session::resume`).
pub struct Job<T>(Pin<Box<dyn Work<T>>>);

/// Work a [`Job`] does: polled until it is done, then finished into what
/// it made. A future is one ([`Job::new`]); work that keeps what it made
/// in its own allocation, and hands that allocation on, is another
/// ([`Job::of`]: an async handler and its answer, in one box).
pub trait Work<T>: Send {
    /// Polls the work, as a future is polled: `Ready` once it is done.
    fn poll_work(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()>;

    /// What the work made, once [`Work::poll_work`] was `Ready`.
    fn finish(self: Pin<Box<Self>>) -> T;
}

pin_project_lite::pin_project! {
    /// A future as work: its output kept until it is finished.
    struct Output<F: Future> {
        #[pin]
        future: F,
        made: Option<F::Output>,
    }
}

impl<F: Future + Send> Work<F::Output> for Output<F>
where
    F::Output: Send,
{
    fn poll_work(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.project();
        if this.made.is_none() {
            *this.made = Some(std::task::ready!(this.future.poll(cx)));
        }
        Poll::Ready(())
    }

    fn finish(mut self: Pin<Box<Self>>) -> F::Output {
        let made = self.as_mut().project().made.take();
        made.expect("finished once done")
    }
}

/// What a [`Job`] made, or that its work panicked (then logged, and its
/// request answered 500).
#[derive(Debug)]
pub struct Finished<T>(pub(crate) Result<T, Panicked>);

impl<T: Send + 'static> Job<T> {
    /// A job of `work`, which the connection awaits.
    pub fn new(work: impl Future<Output = T> + Send + 'static) -> Job<T> {
        Job(Box::pin(Output {
            future: work,
            made: None,
        }))
    }

    /// A job of work already boxed (no second allocation).
    pub fn of(work: Pin<Box<dyn Work<T>>>) -> Job<T> {
        Job(work)
    }

    /// Waits for the work; on a tokio runtime, whose blocking pool builds.
    /// A panic while it is polled is caught here: the connection answers
    /// 500 and goes on.
    pub async fn run(mut self) -> Finished<T> {
        let work = &mut self.0;
        let polled = std::future::poll_fn(|cx| match guarded(|| work.as_mut().poll_work(cx)) {
            Ok(Poll::Ready(())) => Poll::Ready(Ok(())),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => Poll::Ready(Err(log(&*payload, "a job", None))),
        });
        let done = polled.await;
        Finished(done.and_then(|()| {
            guarded(|| self.0.finish()).map_err(|payload| log(&*payload, "a job", None))
        }))
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
