//! A panic during a turn of the session — in the service's code, or the
//! core's — caught once per [`Session::process`](crate::session::Session::process),
//! in each job's poll and in each poll of a chunk awaited: the request gets
//! a 500 (or, once its streamed response has begun, the connection ends
//! the way a stream cut short does: `Session::failed`), the cause is
//! logged once, and the connection's task — and the worker it runs on —
//! goes on.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::fmt::Debug;
use std::panic::{catch_unwind, AssertUnwindSafe};

use tracing::error;

/// Work that panicked (a job's: its request answered 500); logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Panicked;

thread_local! {
    /// Whether this thread runs guarded work now: its panic is caught and
    /// logged once, by [`log`], not by the hook.
    static GUARDED: Cell<bool> = const { Cell::new(false) };
    /// Where the last guarded panic of this thread happened, kept by the
    /// hook for [`log`].
    static PLACE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Runs `f`; a panic becomes its payload.
///
/// Unwind safety: what a panicking turn leaves behind — the state it
/// held, a reply, the service's per-connection state — is dropped unread
/// or read only to close the connection after a 500.
#[inline(always)]
pub(crate) fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, Box<dyn Any + Send>> {
    let outer = GUARDED.replace(true);
    // A place left by a panic the work caught itself is not this one's.
    PLACE.with(|p| p.borrow_mut().take());
    let result = catch_unwind(AssertUnwindSafe(f));
    GUARDED.set(outer);
    result
}

/// Installs the panic hook, once: a guarded panic (a request's) writes
/// nothing where it happens — the standard hook writes straight to stderr,
/// which blocks the worker once a pipe nobody reads is full — and is
/// logged once where it is caught ([`log`]), through the log's bounded
/// sink. Any other panic goes to the log too when `to_log` (under
/// `--log-format json`, so that every line is JSON), else to the standard
/// hook.
pub(crate) fn install_hook(to_log: bool) {
    let standard = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let place = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()));
        if GUARDED.with(Cell::get) {
            PLACE.with(|p| *p.borrow_mut() = place);
        } else if to_log {
            let message = message(info.payload());
            let thread = std::thread::current();
            let thread = thread.name().unwrap_or("unnamed");
            error!(?place, thread, "panic: {message:?}");
        } else {
            standard(info);
        }
    }));
}

/// A panic's message, or what stands for none.
fn message(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(a panic without a message)")
}

/// Logs a panic once, where it was caught: its message (escaped: it may
/// hold request bytes, and a line of the log is never forged), where it
/// happened, `during` what (`"a turn"`, `"a job"`), and the label of the
/// request it was answering, if known.
pub(crate) fn log(payload: &(dyn Any + Send), during: &str, label: Option<&dyn Debug>) -> Panicked {
    let message = message(payload);
    let place = PLACE.with(|p| p.borrow_mut().take());
    match label {
        Some(label) => error!(
            ?label,
            ?place,
            "panic during {during}: {message:?}; its request answered 500"
        ),
        None => error!(
            ?place,
            "panic during {during}: {message:?}; its request answered 500"
        ),
    }
    Panicked
}
