//! The `Date` line (RFC 9110 §6.6.1): rendered at most once a second per
//! thread, from the cheapest clock that knows the second.

use std::cell::Cell;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use unflat::head::DateLine;

thread_local! {
    static DATE: Cell<DateLine> = Cell::new(DateLine::at(SystemTime::now()));
}

/// The current `Date` line: rendered at most once a second per thread.
/// The clock is read once per response, so it is the cheapest one that
/// knows the second ([`unix_second`]).
pub(super) fn date_line() -> DateLine {
    DATE.with(|d| {
        let line = d.get();
        let second = unix_second();
        if second == line.second() {
            return line;
        }
        let line = DateLine::at(UNIX_EPOCH + Duration::from_secs(second));
        d.set(line);
        line
    })
}

/// The wall clock's second since the Unix epoch. On Linux from
/// `CLOCK_REALTIME_COARSE`: the kernel's time as of its last tick, read
/// from the vDSO without reading the time-stamp counter. Under pipelined
/// load the precise clock (`SystemTime::now`, and the subtraction that
/// turns it into seconds) showed in the server's profile
/// (docs/measurements.md, "Server"); a `Date` of one-second resolution
/// loses nothing by lagging a tick (at most a few milliseconds).
#[cfg(target_os = "linux")]
fn unix_second() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
    u64::try_from(now.tv_sec).unwrap_or(0)
}

/// The wall clock's second since the Unix epoch.
#[cfg(not(target_os = "linux"))]
fn unix_second() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
