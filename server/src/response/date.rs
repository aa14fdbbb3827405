//! The `Date` line (RFC 9110 §6.6.1): rendered at most once a second per
//! thread, from the cheapest clock that knows the second.

use std::cell::Cell;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use unflat::head::DateLine;

thread_local! {
    static DATE: Cell<DateLine> = Cell::new(DateLine::at(SystemTime::now()));
}

/// The `Date` line of `second` (since the Unix epoch), rendered at most
/// once a second per thread.
pub(super) fn date_line_at(second: u64) -> DateLine {
    DATE.with(|d| {
        let line = d.get();
        if second == line.second() {
            return line;
        }
        let line = DateLine::at(UNIX_EPOCH + Duration::from_secs(second));
        d.set(line);
        line
    })
}

/// The wall clock's second since the Unix epoch, from the coarse clock: it
/// is read once per response, the precise one showed in the profile, and a
/// one-second `Date` loses nothing by lagging a tick.
#[cfg(target_os = "linux")]
pub(super) fn unix_second() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
    u64::try_from(now.tv_sec).unwrap_or(0)
}

#[cfg(not(target_os = "linux"))]
pub(super) fn unix_second() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
