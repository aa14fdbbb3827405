//! A service's panic, caught where the core calls it: the request gets a
//! 500 (or, once its response has begun, the connection ends the way a
//! stream cut short does), the cause is logged once, and the connection's
//! task — and the worker it runs on — goes on.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use tracing::error;

/// A service call that panicked; the panic's message was logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Panicked;

/// Runs `f`, a call into the service named `what` (`call`, `respond`, …),
/// about the request `about` names; a panic is logged and becomes
/// [`Panicked`].
///
/// Unwind safety: what a panicking call leaves behind — its reply, its
/// stream — is dropped unused, and the connection closes after the 500,
/// so no state it may have left half-changed is read again on it.
#[inline]
pub(super) fn guarded<T>(
    what: &'static str,
    about: &dyn std::fmt::Debug,
    f: impl FnOnce() -> T,
) -> Result<T, Panicked> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| logged(what, about, &*payload))
}

/// Logs a panic of the service's `what` about `about`: once per request.
pub(super) fn logged(what: &str, about: &dyn std::fmt::Debug, payload: &dyn Any) -> Panicked {
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(a panic without a message)");
    error!(service = what, request = ?about, "the service panicked: {message}; answered 500");
    Panicked
}
