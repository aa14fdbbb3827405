//! Whether a client takes a response fast enough to keep its connection,
//! judged by what it acknowledges ([`Socket::acknowledged`]) while a write
//! waits for it: [`Pace`], one per connection.
//!
//! Two rules, both measured over a *send period*: from the first write
//! that waits after the connection last read a request, until it reads
//! again.
//! - **Stopped**: nothing acknowledged for `--send-timeout`, or for three
//!   times the longest wait between two acknowledgements seen in the
//!   period, whichever is longer, and `--min-send-rate-grace` more.
//!   A slow reader's receive window reopens in steps — on loopback's 64 KiB
//!   segments, about 64 KiB at a time — so a steady reader at 25 KB/s
//!   acknowledges nothing for seconds, then a step: the wait it showed
//!   before is what the next may take.
//! - **Too slow** (as Kestrel's `MinResponseDataRate`): once the client has
//!   acknowledged something in the period, it must keep up
//!   `--min-send-rate`, within `--min-send-rate-grace`, as Kestrel's
//!   `MinResponseDataRate` times each write: each step of `n` bytes buys,
//!   from its own moment, the grace and `n / rate` — that at most one
//!   *window* — never added to what earlier steps bought: the client is
//!   too slow once the latest time any step bought is past. So a fast
//!   start buys one window, not its bytes' worth (19 MiB at 240 B/s were
//!   23 h of credit, and a reader that then took 51 B/s was never cut),
//!   and a reader that slows below the rate is cut within the grace and a
//!   window of its last fast step. The window
//!   is what the client's receive window holds at the rate — the largest
//!   window it advertised in the period (`tcpi_snd_wnd`), at least
//!   [`STEP`], with a quarter to spare: what a client acknowledged but has
//!   not read is all it may bank, and a reader at the rate, whose window
//!   reopens in steps smaller than the window, takes each within the time
//!   the one before bought, the grace to spare.
//!
//! Checked only while a write waits, at most every quarter of the shorter
//! of the two times, so a connection whose writes complete costs nothing.

use std::time::Duration;

use super::{Acked, Ended};
use crate::clock::Moment;

/// The rules a client that a write waits for is held to (`Pace`, one per
/// connection, judges by them).
#[derive(Clone, Copy, Debug)]
pub struct PaceRules {
    /// `--send-timeout`: the least time a stopped client is kept.
    pub send_timeout: Duration,
    /// `--min-send-rate`: bytes per second a client must acknowledge on
    /// average.
    pub min_rate: u64,
    /// `--min-send-rate-grace`: the time before the rate counts.
    pub grace: Duration,
}

/// How many times the longest wait between two acknowledgements a client
/// may go without one: steps vary (a window half drained, then three
/// quarters), and are seen only at a check.
const STEP_SLACK: u32 = 3;

/// The least time between two checks.
const CHECK_LEAST: Duration = Duration::from_millis(100);

/// The least window a client is taken to have: loopback's segment, the
/// least a receive window reopens by (and what a system that does not say
/// its peer's window is judged by).
pub(super) const STEP: u64 = 64 * 1024;

/// One connection's judge of its client's pace: what its send period has
/// seen, if one is on. Boxed, and made only when a write waits, so that
/// every idle connection's task holds a pointer, not the period.
#[derive(Debug, Default)]
pub(super) struct Pace {
    period: Option<Box<Period>>,
}

/// What a send period has seen.
#[derive(Clone, Copy, Debug)]
struct Period {
    /// When the client last acknowledged more (or the period began), and
    /// how much it had then.
    last: Moment,
    acked: u64,
    /// When the client falls below the minimum rate unless it
    /// acknowledges more; set by its first acknowledgement of the period.
    due: Option<Moment>,
    /// The longest wait between two acknowledgements seen.
    longest: Duration,
    /// The largest receive window the client advertised in the period.
    window: u64,
}

impl Pace {
    /// Ends the send period: the connection reads a request.
    #[inline]
    pub(super) fn reset(&mut self) {
        self.period = None;
    }

    /// A write waits at `now`, the client having acknowledged `acked`
    /// (`None`: unknown); when to check next. Begins a period if none is on.
    pub(super) fn waiting(
        &mut self,
        rules: &PaceRules,
        now: Moment,
        acked: Option<Acked>,
    ) -> Moment {
        let period = **self.period.get_or_insert_with(|| {
            let acked = acked.unwrap_or_default();
            Box::new(Period {
                last: now,
                acked: acked.bytes,
                due: None,
                longest: Duration::ZERO,
                window: acked.window,
            })
        });
        rules.next_check(&period, now)
    }

    /// A check at `now`, the write still waiting and the client having
    /// acknowledged `acked`: when to check next, or how the connection ends.
    pub(super) fn check(
        &mut self,
        rules: &PaceRules,
        now: Moment,
        acked: Option<Acked>,
    ) -> Result<Moment, Ended> {
        let Some(period) = self.period.as_mut() else {
            return Ok(self.waiting(rules, now, acked));
        };
        if let Some(acked) = acked {
            period.window = period.window.max(acked.window);
        }
        // A step that comes after the time bought does not buy it back:
        // the client was too slow by then (a check at that moment would
        // have said so).
        let late = period.due.is_some_and(|due| now >= due);
        if let Some(acked) = acked.map(|a| a.bytes).filter(|&a| a > period.acked) {
            period.longest = period.longest.max(now.since(period.last));
            let step = acked - period.acked;
            period.last = now;
            period.acked = acked;
            // Each step buys, from its own moment, the grace and its
            // bytes' time at the rate, that at most one window; time bought
            // is never added to time bought before, so nothing is banked:
            // a step while ahead keeps the later of the two.
            let bytes_time = rules.time_for(step).min(rules.window(period.window));
            let bought = now.after(rules.grace).after(bytes_time);
            period.due = Some(period.due.map_or(bought, |due| due.max(bought)));
        }
        let period = **period;
        if now >= rules.stopped_at(&period) {
            return Err(Ended::SendTimeout);
        }
        if late || rules.too_slow_at(&period).is_some_and(|at| now >= at) {
            return Err(Ended::TooSlow);
        }
        Ok(rules.next_check(&period, now))
    }
}

impl PaceRules {
    /// When a client that acknowledges nothing more counts as stopped.
    fn stopped_at(&self, p: &Period) -> Moment {
        // The grace on top: a window's steps vary in size and in time (the
        // first one may come at once, the next one seconds later).
        let wait = (p.longest * STEP_SLACK).max(self.send_timeout) + self.grace;
        p.last.after(wait)
    }

    /// When the client falls below the minimum rate unless it acknowledges
    /// more; `None` before its first step.
    fn too_slow_at(&self, p: &Period) -> Option<Moment> {
        p.due
    }

    /// The time `bytes` take at the minimum rate.
    fn time_for(&self, bytes: u64) -> Duration {
        Duration::from_millis(bytes.saturating_mul(1000) / self.min_rate.max(1))
    }

    /// The most time a step may buy beyond the grace, the client's largest
    /// window seen being `window`: the time the larger of it and [`STEP`]
    /// takes at the minimum rate, and a quarter.
    pub(super) fn window(&self, window: u64) -> Duration {
        let window = STEP.max(window);
        self.time_for(window.saturating_add(window / 4))
    }

    /// The next check: at a deadline, or sooner, to see steps as they come.
    fn next_check(&self, p: &Period, now: Moment) -> Moment {
        let every = (self.send_timeout.min(self.grace) / 4).max(CHECK_LEAST);
        let mut at = now.after(every).min(self.stopped_at(p));
        if let Some(slow) = self.too_slow_at(p) {
            at = at.min(slow);
        }
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: PaceRules = PaceRules {
        send_timeout: Duration::from_secs(3),
        min_rate: 240,
        grace: Duration::from_secs(5),
    };

    /// `bytes` acknowledged, the window unknown.
    fn acked(bytes: u64) -> Acked {
        Acked { bytes, window: 0 }
    }

    /// A moment well after the clock's start.
    fn now() -> Moment {
        Moment::default().after(Duration::from_secs(1000))
    }

    /// A period that began `ago` ms before [`now`] with `base` acknowledged.
    fn pace_since(ago: u64, base: u64) -> Pace {
        let began = now().before(Duration::from_millis(ago));
        Pace {
            period: Some(Box::new(Period {
                last: began,
                acked: base,
                due: None,
                longest: Duration::ZERO,
                window: 0,
            })),
        }
    }

    #[test]
    fn a_client_that_acknowledges_nothing_is_stopped_after_the_timeout_and_grace() {
        assert!(pace_since(7_900, 0)
            .check(&RULES, now(), Some(acked(0)))
            .is_ok());
        assert!(matches!(
            pace_since(8_100, 0).check(&RULES, now(), Some(acked(0))),
            Err(Ended::SendTimeout)
        ));
        assert!(matches!(
            pace_since(8_100, 0).check(&RULES, now(), None),
            Err(Ended::SendTimeout)
        ));
    }

    #[test]
    fn steps_as_long_apart_as_before_are_waited_for() {
        let mut pace = pace_since(0, 0);
        let p = pace.period.as_mut().unwrap();
        p.longest = Duration::from_secs(4);
        p.due = Some(now().after(Duration::from_secs(100)));
        p.acked = 100_000;
        // Quiet for 16 s after a step that came 4 s after the one before:
        // within three times that and the grace.
        p.last = p.last.before(Duration::from_secs(16));
        assert!(pace.check(&RULES, now(), Some(acked(100_000))).is_ok());
        let p = pace.period.as_mut().unwrap();
        p.last = p.last.before(Duration::from_secs(2));
        assert!(matches!(
            pace.check(&RULES, now(), Some(acked(100_000))),
            Err(Ended::SendTimeout)
        ));
    }

    #[test]
    fn a_trickle_below_the_rate_is_too_slow_after_the_grace() {
        // A step of 576 bytes 8 s ago (buying 2.4 s after the 5 s grace),
        // then steps of a few bytes: past.
        let mut pace = pace_since(8_000, 0);
        let eight_ago = now().before(Duration::from_secs(8));
        assert!(pace.check(&RULES, eight_ago, Some(acked(576))).is_ok());
        assert!(matches!(
            pace.check(&RULES, now(), Some(acked(600))),
            Err(Ended::TooSlow)
        ));
        // At the rate, it is kept.
        let mut pace = pace_since(8_000, 0);
        assert!(pace.check(&RULES, eight_ago, Some(acked(240))).is_ok());
        for s in 1..=8 {
            let at = eight_ago.after(Duration::from_secs(s));
            assert!(
                pace.check(&RULES, at, Some(acked(240 * (s + 1)))).is_ok(),
                "{s}"
            );
        }
    }

    /// A fast start buys one window, not its bytes' worth: 19 MiB through
    /// a 64 KiB window, then 1 KiB every 20 s (51 B/s), is cut within the
    /// window (it was kept for 23 h); a reader at 300 B/s whose 4 MiB
    /// window reopens in 64 KiB steps, 218 s apart, is kept.
    #[test]
    fn a_fast_start_buys_one_window() {
        let window = RULES.window(STEP);
        assert_eq!(window, Duration::from_millis(341_333));
        let window = window + RULES.grace;
        let start = now();
        let mut pace = pace_since(0, 0);
        let mut bytes = 0;
        for i in 0..304 {
            bytes += STEP;
            let at = start.before(Duration::from_millis(304 - i));
            let seen = Acked {
                bytes,
                window: STEP,
            };
            assert!(pace.check(&RULES, at, Some(seen)).is_ok());
        }
        let mut cut = None;
        for i in 1..=100 {
            let at = start.after(Duration::from_secs(20 * i));
            bytes += 1024;
            if pace
                .check(&RULES, at, Some(Acked { bytes, window: 0 }))
                .is_err()
            {
                cut = Some(at.since(start));
                break;
            }
        }
        // Within the grace and the window of its last fast step (that
        // step's own bytes' time: 273 s), and a step's check.
        let cut = cut.expect("cut");
        let bound = window + Duration::from_secs(20);
        assert!(cut <= bound, "{cut:?} > {bound:?}");
        let mut pace = pace_since(0, 0);
        let mut bytes = 4 << 20;
        let full = Acked {
            bytes,
            window: 4 << 20,
        };
        assert!(pace.check(&RULES, start, Some(full)).is_ok());
        for i in 1..=16 {
            let at = start.after(Duration::from_millis(218_453 * i));
            bytes += STEP;
            assert!(
                pace.check(&RULES, at, Some(Acked { bytes, window: 0 }))
                    .is_ok(),
                "step {i}"
            );
        }
    }
}
