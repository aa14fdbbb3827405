//! The server's one clock, for deadlines and latency alike: the kernel's
//! coarse monotonic clock in milliseconds (`CLOCK_MONOTONIC_COARSE` on
//! Linux, read without a system call; resolution 1 to 4 ms), so that a
//! request pays for no precise clock.

use std::time::Duration;

/// A moment on the server's clock: milliseconds since a point fixed when
/// the process first read it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Moment(u64);

/// The clock's end: a moment that never comes.
const NEVER: u64 = u64::MAX - 1;

impl Moment {
    /// The clock's reading now.
    pub fn now() -> Moment {
        Moment(millis())
    }

    /// `d` later, saturating (a deadline past the clock's range never comes).
    pub fn after(self, d: Duration) -> Moment {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Moment(self.0.saturating_add(ms).min(NEVER))
    }

    /// `d` earlier, saturating at the clock's start.
    pub fn before(self, d: Duration) -> Moment {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Moment(self.0.saturating_sub(ms))
    }

    /// `d` from now.
    pub fn in_(d: Duration) -> Moment {
        Moment::now().after(d)
    }

    /// Milliseconds since the clock's start.
    pub fn millis(self) -> u64 {
        self.0
    }

    /// How long after `earlier` this is (zero if it is not after it).
    pub fn since(self, earlier: Moment) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

#[cfg(target_os = "linux")]
fn millis() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
    let ms = u64::try_from(t.tv_sec).unwrap_or(0) * 1000
        + u64::try_from(t.tv_nsec).unwrap_or(0) / 1_000_000;
    ms.saturating_sub(epoch())
}

#[cfg(not(target_os = "linux"))]
fn millis() -> u64 {
    use std::sync::OnceLock;
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    let start = *START.get_or_init(std::time::Instant::now);
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// The first reading, so that moments start near zero.
#[cfg(target_os = "linux")]
fn epoch() -> u64 {
    use std::sync::OnceLock;
    static EPOCH: OnceLock<u64> = OnceLock::new();
    *EPOCH.get_or_init(|| {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
        // A second before now, so that no moment read later is zero.
        (u64::try_from(t.tv_sec).unwrap_or(0) * 1000).saturating_sub(1000)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_moves_forward_and_saturates() {
        let a = Moment::now();
        std::thread::sleep(Duration::from_millis(30));
        let took = Moment::now().since(a);
        assert!(took >= Duration::from_millis(20), "{took:?}");
        assert_eq!(a.since(Moment::now()), Duration::ZERO);
        assert_eq!(a.after(Duration::MAX).millis(), NEVER);
    }
}
