//! The `Date` line (RFC 9110 §6.6.1): rendered at most once a second per
//! thread, from the cheapest clock that knows the second.

use std::cell::Cell;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use unflat::head::DateLine;

thread_local! {
    static DATE: Cell<DateLine> = Cell::new(DateLine::at(SystemTime::now()));
}

/// The second the responses of one turn of a connection are dated by:
/// the clock read once per turn, not once per response (a turn answers
/// its pipelined requests within microseconds). Four bytes, which every
/// idle connection keeps: they count seconds until 2106.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Second(u32);

impl Second {
    /// The current second, since the Unix epoch.
    #[inline]
    pub fn now() -> Second {
        Second(u32::try_from(unix_second()).unwrap_or(u32::MAX))
    }

    /// Seconds since the Unix epoch.
    #[inline]
    pub(super) fn unix(self) -> u64 {
        u64::from(self.0)
    }
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
fn unix_second() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
    u64::try_from(now.tv_sec).unwrap_or(0)
}

#[cfg(not(target_os = "linux"))]
fn unix_second() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
