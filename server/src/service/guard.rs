//! A panic during a turn of the session — in the service's code, or the
//! core's — caught once per [`Session::process`](crate::session::Session::process),
//! in each job's poll and in each poll of a chunk awaited: the request gets
//! a 500 (or, once its streamed response has begun, the connection ends
//! the way a stream cut short does: `Session::failed`), the cause is
//! logged once, and the connection's task — and the worker it runs on —
//! goes on.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use tracing::error;

/// Work that panicked (a job's: its request answered 500); logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Panicked;

/// Runs `f`; a panic becomes its payload.
///
/// Unwind safety: what a panicking turn leaves behind — the state it
/// held, a reply, the service's per-connection state — is dropped unread
/// or read only to close the connection after a 500.
#[inline(always)]
pub(crate) fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, Box<dyn Any + Send>> {
    catch_unwind(AssertUnwindSafe(f))
}

/// Logs a panic's message, and `during` what (`"a turn"`, `"a job"`):
/// once per panic.
pub(crate) fn log(payload: &(dyn Any + Send), during: &str) -> Panicked {
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(a panic without a message)");
    error!("panic during {during}: {message}; its request answered 500");
    Panicked
}
